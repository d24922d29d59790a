"""Stopping LangHost leaves nothing behind: no runtime or plugin process after SIGKILL of the
runtime-owning process, no MCP server after `manage.py serve` stops."""

import signal
import sys
import time
from pathlib import Path

import httpx
import pytest

from runners.runtime.process import free_port
from runners.tests.conftest import plugins_dir_with
from runners.tests.langhost_process import (
    descendants,
    fresh_data_dir,
    langhost_env,
    popen_manage,
    start_serve,
    wait_until_serving,
)
from runners.tests.tools.conftest import SERVER
from tests.runtime.runtime_helpers import alive
from tests.timing import scaled

pytestmark = pytest.mark.processes


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


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL])
def test_stopping_manage_py_serve_leaves_no_mcp_server_process(tmp_path, stop):
    port = free_port()
    langhost = start_serve(fresh_data_dir(tmp_path / "data"), plugins_dir_with(tmp_path), port)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=scaled(30)) as http:
            http.headers["Authorization"] = f"Bearer {wait_until_serving(http, langhost)}"
            server = http.post("/api/v1/mcp-servers", json={
                "name": "calc", "transport": "stdio", "command": sys.executable,
                "args": [str(SERVER)]}).json()
            refreshed = http.post(f"/api/v1/mcp-servers/{server['id']}/refresh").json()
        assert "add" in [tool["name"] for tool in refreshed["tools"]]
        mcp_children = [pid for pid in descendants(langhost.pid)
                        if str(SERVER) in Path(f"/proc/{pid}/cmdline").read_text()]
        assert mcp_children, "the MCP server runs under LangHost"
    finally:
        langhost.send_signal(stop)
        langhost.wait(timeout=scaled(30))

    give_up = time.monotonic() + scaled(5)
    while alive_ones := [pid for pid in mcp_children if alive(pid)]:
        assert time.monotonic() < give_up, f"MCP server still alive after {stop.name}: {alive_ones}"
        time.sleep(0.05)
