"""`manage.py runners --refresh` against a fresh data dir finds the echo fixture's runner.

Acceptance of issue 3: within 10 s, in stdio mode (LangHost spawns the runtime) and in ws
mode (LangHost connects to a runtime started on its own, with the control token).
"""

import re
import time

import pytest

from runners.tests.conftest import plugins_dir_with
from runners.tests.langhost_process import fresh_data_dir, langhost_env, popen_manage
from tests.runtime.runtime_helpers import TOKEN, ExternalRuntime, make_runtime_dir
from tests.timing import scaled

pytestmark = pytest.mark.processes

ECHO_AVAILABLE = re.compile(r"^plugin:e2e/agent-runner-qa/default\s+yes\s+plugin\s", re.M)


def refresh(env) -> tuple[str, float]:
    """The command's output and the seconds from its start until it listed the echo runner."""
    started = time.monotonic()
    command = popen_manage("runners", "--refresh", "--timeout", str(scaled(9)), env=env)
    try:
        output, listed_after = "", None
        for line in command.stdout:
            output += line
            if listed_after is None and ECHO_AVAILABLE.search(line):
                listed_after = time.monotonic() - started
        assert command.wait(timeout=scaled(30)) == 0, output
    finally:
        command.kill()
        command.wait()
    assert listed_after is not None, output
    return output, listed_after


def test_runners_refresh_lists_echo_runner_within_10s_in_stdio_mode(tmp_path):
    env = langhost_env(fresh_data_dir(tmp_path / "data"),
                       plugins_dir_with(tmp_path, "e2e__agent-runner-qa"))

    output, seconds = refresh(env)

    assert seconds < scaled(10), output
    assert (tmp_path / "data" / "runtime" / "data" / "plugins" / "e2e__agent-runner-qa").is_symlink()


@pytest.fixture
def ws_runtime(tmp_path):
    runtime = ExternalRuntime(make_runtime_dir(tmp_path / "rt", "e2e__agent-runner-qa"))
    runtime.start()
    yield runtime
    runtime.kill()


def test_runners_refresh_lists_echo_runner_within_10s_in_ws_mode(tmp_path, ws_runtime):
    env = langhost_env(fresh_data_dir(tmp_path / "data"), ws_runtime.runtime_dir / "data" / "plugins",
                       LANGHOST_RUNTIME_URL=ws_runtime.url, LANGHOST_RUNTIME_TOKEN=TOKEN)

    output, seconds = refresh(env)

    assert seconds < scaled(10), output
    assert not (tmp_path / "data" / "runtime").exists()  # nothing spawned in ws mode
    assert ws_runtime.process.poll() is None  # and the operator's runtime is left running
