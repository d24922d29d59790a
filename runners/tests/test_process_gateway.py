"""One gateway per process, bound to one loop and reachable from every other; one protocol."""

import asyncio

import pytest
from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer

from runners.execution.orchestrator import Orchestrator
from runners.plugins import gateway as gateway_module
from runners.plugins.gateway import Gateway, LocalGateway, get_gateway
from runners.protocol import AgentBinding, AgentEventEnvelope, new_run_id
from runners.runtime.host_process import host_process
from runners.runtime.loop_bound import LoopBoundGateway
from runners.runtime.worker import ChannelGateway
from tests.timing import scaled


def qa_binding(runner: str, **config) -> AgentBinding:
    return AgentBinding(binding_id=f"loop-bound-{runner}", runner_config=config,
                        runner_id=f"plugin:e2e/agent-runner-qa/{runner}")


def test_every_gateway_satisfies_the_gateway_protocol(tmp_path):
    local = LocalGateway(plugins_dir=tmp_path / "plugins", runtime_dir=tmp_path / "runtime",
                         url="", instance="protocol")

    assert isinstance(local, Gateway)
    assert isinstance(ChannelGateway(InMemoryChannelLayer()), Gateway)
    assert isinstance(LoopBoundGateway(local, asyncio.new_event_loop()), Gateway)


@pytest.mark.django_db
def test_admin_page_loads_on_throwaway_loops_share_one_gateway(admin_browser, monkeypatch):
    made = []

    class CountedGateway(LocalGateway):
        def __init__(self):
            super().__init__()
            made.append(self)

    process = host_process()
    monkeypatch.setattr(process, "gateway_binding", None)
    monkeypatch.setattr(gateway_module, "LocalGateway", CountedGateway)

    for _ in range(5):  # each page asks through async_to_sync, on a loop of its own
        assert admin_browser.get("/admin/runtime/").status_code == 200

    assert len(made) == 1
    assert async_to_sync(_current_gateway)() is process.gateway_binding
    assert process.gateway_binding.loop is process.loop  # the process's own, not a page's
    assert made[0].link.pid is None  # asking for its status started no runtime


async def _current_gateway():
    return get_gateway()


@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.django_db(transaction=True)
@pytest.mark.processes  # the QA plugin's runtime
async def test_a_run_on_another_loop_streams_through_the_gateways_own(qa_gateway):
    bound = LoopBoundGateway(qa_gateway, asyncio.get_running_loop())
    event = AgentEventEnvelope(conversation_id="loop-bound", input={"text": "across"})

    outcome = await asyncio.to_thread(
        lambda: asyncio.run(Orchestrator(bound).run_to_end(event, qa_binding("default"))))

    assert outcome["status"] == "completed"
    assert outcome["messages"][0]["data"]["message"]["content"] == "e2e echo: across"


@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.django_db(transaction=True)
@pytest.mark.processes  # the QA plugin's runtime
async def test_a_run_stopped_on_another_loop_cancels_the_runner(qa_gateway):
    bound, run_id = LoopBoundGateway(qa_gateway, asyncio.get_running_loop()), new_run_id()
    event = AgentEventEnvelope(input={"text": "sleep"})

    outcome = await asyncio.to_thread(lambda: asyncio.run(Orchestrator(bound).run_to_end(
        event, qa_binding("slow", sleep=30, timeout=0.5), run_id=run_id)))

    assert outcome["status"] == "timeout"
    marker = qa_gateway.plugins_dir / "e2e__agent-runner-qa" / f"cancelled-{run_id}"
    for _ in range(round(scaled(40))):
        if marker.exists():
            break
        await asyncio.sleep(0.05)
    assert marker.exists()
