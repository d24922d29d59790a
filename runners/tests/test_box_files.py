"""What a box leaves in its workspace cannot stall the host's own file work there: a write
replaces a pipe at its path instead of opening it (and waiting for a reader for ever, on the
thread the process's database work shares)."""

import os
import threading

import pytest

from runners.box.services import Workspace, read_file, write_file
from tests.timing import scaled


@pytest.fixture
def workspace(settings, tmp_path):
    settings.DATA_DIR = tmp_path
    space = Workspace(project_id="p", conversation_id="c")
    space.ensure()
    return space


def test_a_write_replaces_a_pipe_the_box_left_at_its_path(workspace):
    pipe = workspace.directory / "notes.md"
    os.mkfifo(pipe)
    written = threading.Event()

    def write():
        write_file(workspace, "/workspace/notes.md", b"tide at 7")
        written.set()

    threading.Thread(target=write, daemon=True).start()
    in_time = written.wait(scaled(5))
    if not in_time:  # the write opened the pipe: a reader lets it go
        os.close(os.open(pipe, os.O_RDONLY | os.O_NONBLOCK))

    assert in_time
    assert read_file(workspace, "/workspace/notes.md") == b"tide at 7"
