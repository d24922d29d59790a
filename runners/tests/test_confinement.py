"""What either engine gives a confined command, seen from inside it: the kernel's settings
read-only, /dev/null usable, LangHost's data dir hidden even under a path it may read; and,
confined by `confine.py`, a stopping signal that reaches the command (a small init passes it
on)."""

import signal
import subprocess

import pytest

from runners.runtime import sandbox
from tests.timing import scaled

pytestmark = pytest.mark.processes


@pytest.fixture(params=["bwrap", "namespaces"])
def confined(request, tmp_path):
    """`confined(command)`: the argv of `sh -c command` confined by the engine, reading
    `tmp_path` (which holds a `data` dir to keep hidden) and writing `tmp_path/work`."""
    problem, _ = sandbox._probe(request.param)
    if problem:
        pytest.skip(f"{request.param} cannot confine here: {problem}")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "secret_key").write_text("hidden-secret")
    (tmp_path / "shown.txt").write_text("shown\n")
    (tmp_path / "work").mkdir()
    engine = sandbox.Sandbox(request.param, (*sandbox.readable_paths(), str(tmp_path)),
                             hidden=(str(tmp_path / "data"),),
                             bwrap=sandbox.shutil.which("bwrap") or "")

    def argv(command: str) -> list[str]:
        return [*engine.command_argv([str(tmp_path / "work")], str(tmp_path / "work")),
                "/bin/sh", "-c", command]

    return argv


def run(argv) -> str:
    return subprocess.run(argv, capture_output=True, text=True, timeout=scaled(60)).stdout


def test_the_kernels_settings_are_read_only_and_dev_null_is_usable(confined):
    said = run(confined("test -w /proc/sys/kernel/core_pattern && echo writable; "
                        "test -w /proc/sysrq-trigger && echo trigger; "
                        "echo x > /dev/null && echo devnull"))

    assert said.split() == ["devnull"]


def test_the_data_dir_stays_hidden_under_a_path_it_may_read(confined, tmp_path):
    said = run(confined(f"cat {tmp_path}/shown.txt; ls -A {tmp_path}/data; "
                        f"cat {tmp_path}/data/secret_key; echo end"))

    assert said.split() == ["shown", "end"]


def test_a_stopping_signal_reaches_the_confined_command(confined, request):
    if request.node.callspec.params["confined"] == "bwrap":
        pytest.skip("bubblewrap passes no signal on: LangHost signals the process it confines "
                    "itself (its pid from --info-fd)")
    process = subprocess.Popen(confined("trap 'echo stopped; exit 3' TERM; echo up; "
                                        "while :; do sleep 0.1; done"),
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "up"
        process.send_signal(signal.SIGTERM)
        said = process.stdout.read()
        process.wait(timeout=scaled(10))
    finally:
        process.kill()

    assert "stopped" in said
