"""SIGKILL of LangHost's runtime-owning process leaves no runtime or plugin process behind."""

import signal
import time

from runners.tests.conftest import plugins_dir_with
from runners.tests.langhost_process import descendants, fresh_data_dir, langhost_env, popen_manage
from tests.runtime.runtime_helpers import alive
from tests.timing import scaled


def test_sigkilled_manage_py_runtime_leaves_no_runtime_or_plugin_process(tmp_path):
    env = langhost_env(fresh_data_dir(tmp_path / "data"),
                       plugins_dir_with(tmp_path, "e2e__agent-runner-qa"))
    langhost = popen_manage("runtime", env=env)
    try:
        ready = langhost.stdout.readline()  # printed once discovery settled
        assert ready.startswith("runtime stdio ready;"), ready
        assert "plugin:e2e/agent-runner-qa/default" in ready
        children = descendants(langhost.pid)
        assert len(children) >= 2, "the runtime and its plugin process were running"
    finally:
        langhost.send_signal(signal.SIGKILL)
        langhost.wait()

    limit = scaled(5)
    give_up = time.monotonic() + limit
    while alive_ones := [pid for pid in children if alive(pid)]:
        assert time.monotonic() < give_up, f"still alive {limit} s after SIGKILL: {alive_ones}"
        time.sleep(0.05)
