"""ws mode: the link connects to a separately started runtime, with its control token."""

from __future__ import annotations

import pytest
import pytest_asyncio
from memory_host import MemoryHost
from runtime_helpers import (
    TOKEN,
    ExternalRuntime,
    collect,
    make_runtime_dir,
    run_context,
    wait_for_runner,
    wait_until,
)

from runners.runtime import RuntimeLink
from tests.timing import scaled

pytestmark = pytest.mark.processes


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
    await ws_link.wait_ready(scaled(15))
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
    await ws_link.wait_ready(scaled(15))
    await wait_for_runner(ws_link, "plugin:e2e/agent-runner-qa/default")

    external_runtime.kill()
    await wait_until(lambda: ws_link.state != "ready", 5, "the link to notice the drop")
    external_runtime.start()  # same ports, fresh process: the handshake must be redone
    await ws_link.wait_ready(scaled(15))
    await wait_for_runner(ws_link, "plugin:e2e/agent-runner-qa/default")
    assert ws_link.status()["sessions"] >= 2
    results = await collect(ws_link, "default", run_context("again"))
    assert results[-1]["type"] == "run.completed"
