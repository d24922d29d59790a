"""Another process's view of the runtime: the `langhost.runtime` channel and ChannelGateway.

The in-memory channel layer keeps both ends in this process; with Redis they are processes apart.
"""

import asyncio
import contextlib
import sys

import pytest
import pytest_asyncio
from channels.layers import InMemoryChannelLayer, get_channel_layer

from ledger.models import AgentRun
from runners.execution.orchestrator import Orchestrator
from runners.protocol import AgentBinding, AgentEventEnvelope, new_run_id
from runners.runtime import liveness
from runners.runtime.errors import RuntimeLinkError, ToolNotFound
from runners.runtime.worker import ChannelGateway, RuntimeWorkerConsumer, serve
from tests.timing import scaled

pytestmark = [pytest.mark.processes, pytest.mark.asyncio(loop_scope="session"), pytest.mark.django_db(transaction=True)]


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def channel_gateway(qa_gateway):
    """One worker for the session: a cancelled Worker leaves its channel listeners behind,
    and two listeners on one channel would split its messages."""
    layer = get_channel_layer()
    worker = asyncio.ensure_future(serve(qa_gateway, layer))
    yield ChannelGateway(layer)
    worker.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await worker


def binding(runner: str, **config) -> AgentBinding:
    return AgentBinding(binding_id=f"worker-{runner}", runner_config=config,
                        runner_id=f"plugin:e2e/agent-runner-qa/{runner}")


async def test_discovery_through_the_channel_lists_plugin_runners(channel_gateway):
    discovered = await channel_gateway.discover()

    assert "plugin:e2e/agent-runner-qa/default" in [descriptor.pk for descriptor in discovered]


async def test_run_through_the_channel_completes(channel_gateway):
    event = AgentEventEnvelope(conversation_id="via-channel", input={"text": "over the layer"})
    outcome = await Orchestrator(channel_gateway).run_to_end(event, binding("default"))

    assert outcome["status"] == "completed"
    assert outcome["messages"][0]["data"]["message"]["content"] == "e2e echo: over the layer"


async def test_cancel_through_the_channel_reaches_the_plugin(channel_gateway, qa_gateway):
    orchestrator, run_id = Orchestrator(channel_gateway), new_run_id()
    stream = orchestrator.run(AgentEventEnvelope(input={"text": "x"}), binding("slow", sleep=30),
                              run_id=run_id)
    await anext(stream)
    consume = asyncio.ensure_future(anext(stream, None))
    await orchestrator.cancel(run_id, "stop via channel")
    assert await asyncio.wait_for(consume, scaled(1.0)) is None

    assert (await AgentRun.objects.aget(run_id=run_id)).status == "cancelled"
    marker = qa_gateway.plugins_dir / "e2e__agent-runner-qa" / f"cancelled-{run_id}"
    for _ in range(round(scaled(40))):
        if marker.exists():
            break
        await asyncio.sleep(0.05)
    assert marker.exists()


async def test_status_through_the_channel_reports_the_link(channel_gateway):
    status = await channel_gateway.status()

    assert status["mode"] == "stdio" and status["state"] == "ready"


async def test_each_run_recycles_the_workers_database_connections(channel_gateway, monkeypatch):
    recycled = []

    async def recycle():  # counts the worker's calls, not a background loop's
        recycled.append(sys._getframe(1).f_code.co_name)

    monkeypatch.setattr(liveness, "recycle_db_connections", recycle)
    event = AgentEventEnvelope(input={"text": "twice"})
    for _ in range(2):
        assert (await Orchestrator(channel_gateway).run_to_end(
            event.model_copy(update={"event_id": new_run_id()}), binding("default"),
        ))["status"] == "completed"

    assert recycled.count("run_start") == 2


async def test_plugin_tool_calls_through_the_channel_answer_and_fail_like_local_ones(
        channel_gateway, tools_gateway, monkeypatch):
    await tools_gateway.discover(scaled(30))
    # The session's one worker serves the runtime that has the tool plugins for this test.
    monkeypatch.setattr(RuntimeWorkerConsumer, "gateway", tools_gateway)

    assert await channel_gateway.call_tool("e2e", "tools-demo", "reverse", {"text": "stressed"},
                                           scaled(10)) == {"text": "desserts"}
    with pytest.raises(ToolNotFound):
        await channel_gateway.call_tool("e2e", "tools-demo", "no_such_tool", {}, scaled(10))
    with pytest.raises(RuntimeLinkError, match="KeyError"):
        await channel_gateway.call_tool("e2e", "tools-demo", "reverse", {}, scaled(10))


async def test_a_run_no_worker_takes_fails_within_half_a_lease(channel_gateway, settings):
    await channel_gateway.discover()  # the runner is known; no worker will take its run
    settings.LANGHOST_RUN_LEASE_SECONDS = scaled(1.2)
    nobody_listens = ChannelGateway(InMemoryChannelLayer())
    started = asyncio.get_running_loop().time()

    outcome = await Orchestrator(nobody_listens).run_to_end(
        AgentEventEnvelope(input={"text": "anyone?"}), binding("default"))

    assert outcome["status"] == "failed"
    assert "no runtime worker took the run" in outcome["status_reason"]
    assert asyncio.get_running_loop().time() - started < settings.LANGHOST_RUN_LEASE_SECONDS
