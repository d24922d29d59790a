"""ws mode: the link connects to a separately started runtime, with its control token."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_asyncio
from runtime_helpers import collect, make_runtime_dir, run_context, wait_for_runner, wait_until

from runners.runtime import MemoryHost, RuntimeLink
from runners.runtime.process import DEAD_PYPI_INDEX, free_port

TOKEN = "e2e-control-token-0123456789abcdef-xyz"


class ExternalRuntime:
    """``rt`` in ws mode, as an operator would run it, in its own process group."""

    def __init__(self, runtime_dir: Path):
        self.runtime_dir = runtime_dir
        self.control_port = free_port()
        self.debug_port = free_port()
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.control_port}/control/ws"

    def start(self) -> None:
        env = {
            **os.environ,
            "LANGBOT_PLUGIN_RUNTIME_CONTROL_TOKEN": TOKEN,
            "LANGBOT_PLUGIN_PYPI_INDEX_URL": DEAD_PYPI_INDEX,
        }
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "langbot_plugin.cli.__main__",
                "rt",
                "--ws-control-port",
                str(self.control_port),
                "--ws-debug-port",
                str(self.debug_port),
                "--skip-deps-check",
            ],
            cwd=self.runtime_dir,
            env=env,
            start_new_session=True,
        )

    def kill(self) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


@pytest.fixture
def external_runtime(tmp_path):
    runtime = ExternalRuntime(make_runtime_dir(tmp_path, "e2e__agent-runner-qa"))
    runtime.start()
    yield runtime
    runtime.kill()


@pytest_asyncio.fixture
async def ws_link(external_runtime, tmp_path):
    link = RuntimeLink(
        MemoryHost(),
        "pytest-ws",
        url=external_runtime.url,
        token=TOKEN,
        transfer_dir=tmp_path / "transfers",
        backoff_initial=0.2,
    )
    await link.start()
    yield link
    await link.stop()


@pytest.mark.asyncio
async def test_ws_link_connects_with_token_lists_runners_and_runs(ws_link):
    await ws_link.wait_ready(15)
    await wait_for_runner(ws_link, "plugin:e2e/agent-runner-qa/default")
    assert ws_link.status()["mode"] == "ws" and ws_link.pid is None
    results = await collect(ws_link, "default", run_context("over ws"))
    assert [r["type"] for r in results] == ["message.completed", "state.updated", "run.completed"]
    assert results[0]["data"]["message"]["content"] == "e2e echo: over ws"


@pytest.mark.asyncio
async def test_ws_link_with_a_wrong_token_is_refused_and_not_ready(external_runtime, tmp_path):
    link = RuntimeLink(
        MemoryHost(),
        "pytest-ws-bad",
        url=external_runtime.url,
        token="x" * 40,
        transfer_dir=tmp_path / "transfers",
        backoff_initial=0.2,
    )
    await link.start()
    try:
        await wait_until(lambda: link.last_error and "401" in link.last_error, 10, "a 401")
        assert link.state != "ready"
    finally:
        await link.stop()


@pytest.mark.asyncio
async def test_ws_link_reconnects_to_a_restarted_runtime(ws_link, external_runtime):
    await ws_link.wait_ready(15)
    await wait_for_runner(ws_link, "plugin:e2e/agent-runner-qa/default")

    external_runtime.kill()
    await wait_until(lambda: ws_link.state != "ready", 5, "the link to notice the drop")
    external_runtime.start()  # same ports, fresh process: the handshake must be redone
    await ws_link.wait_ready(15)
    await wait_for_runner(ws_link, "plugin:e2e/agent-runner-qa/default")
    assert ws_link.status()["sessions"] >= 2
    results = await collect(ws_link, "default", run_context("again"))
    assert results[-1]["type"] == "run.completed"
