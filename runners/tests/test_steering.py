"""A message for a conversation whose active run steers joins that run instead of starting one."""

import pytest

from ledger.models import AgentRun, EventLog, SteeringItem
from runners.execution.orchestrator import Orchestrator
from runners.protocol import AgentBinding, AgentEventEnvelope, new_run_id

pytestmark = [pytest.mark.processes, pytest.mark.backend, pytest.mark.asyncio(loop_scope="session"), pytest.mark.django_db(transaction=True)]


def steerable(**config) -> AgentBinding:
    return AgentBinding(binding_id="steer", runner_id="plugin:e2e/agent-runner-qa/steerable",
                        runner_config=config, state_policy={"state_scopes": ["conversation"]})


def message(text: str, conversation: str) -> AgentEventEnvelope:
    return AgentEventEnvelope(conversation_id=conversation, input={"text": text})


async def test_follow_up_is_pulled_by_the_active_run_and_starts_no_run(qa_gateway):
    orchestrator, run_id = Orchestrator(qa_gateway), new_run_id()
    first = orchestrator.run(message("start", "steer-1"), steerable(wait=5), run_id=run_id)
    assert (await anext(first)).type == "message.delta"

    follow_up = message("and also this", "steer-1")
    absorbed = await orchestrator.run_to_end(follow_up, steerable(wait=5))
    rest = [m async for m in first]

    assert (absorbed["status"], absorbed["run_id"]) == ("steered", run_id)
    assert rest[-1].data["message"]["content"] == "steered: and also this"
    item = await SteeringItem.objects.aget(event_id=follow_up.event_id)
    assert (item.run_id, item.status) == (run_id, "injected")
    assert not await AgentRun.objects.filter(event_id=follow_up.event_id).aexists()
    assert await EventLog.objects.filter(event_id=follow_up.event_id).aexists()


async def test_items_never_pulled_are_dropped_when_the_run_ends(qa_gateway):
    orchestrator, run_id = Orchestrator(qa_gateway), new_run_id()
    first = orchestrator.run(message("start", "steer-2"), steerable(wait=0.5, pull=False),
                             run_id=run_id)
    await anext(first)
    follow_up = message("too late", "steer-2")
    await orchestrator.run_to_end(follow_up, steerable())
    [m async for m in first]

    item = await SteeringItem.objects.aget(event_id=follow_up.event_id)
    assert (item.status, item.reason) == ("dropped", "run_ended")
    assert (await AgentRun.objects.aget(run_id=run_id)).status == "completed"


async def test_a_message_of_another_actor_in_the_conversation_starts_a_run_of_its_own(qa_gateway):
    orchestrator, run_id = Orchestrator(qa_gateway), new_run_id()
    first = orchestrator.run(message("start", "steer-3"), steerable(wait=1, pull=False),
                             run_id=run_id)
    await anext(first)
    intruder = AgentEventEnvelope(conversation_id="steer-3", input={"text": "let me in"},
                                  actor={"actor_type": "user", "actor_id": "mallory"})

    outcome = await orchestrator.run_to_end(intruder, steerable(wait=0.1, pull=False))
    [m async for m in first]

    assert outcome["status"] == "completed" and outcome["run_id"] != run_id
    assert not await SteeringItem.objects.filter(event_id=intruder.event_id).aexists()


async def test_a_message_through_another_binding_starts_a_run_of_its_own(qa_gateway):
    orchestrator, run_id = Orchestrator(qa_gateway), new_run_id()
    first = orchestrator.run(message("start", "steer-4"), steerable(wait=1, pull=False),
                             run_id=run_id)
    await anext(first)
    elsewhere = message("elsewhere", "steer-4")
    other_binding = steerable(wait=0.1, pull=False).model_copy(
        update={"binding_id": "another-binding"})

    outcome = await orchestrator.run_to_end(elsewhere, other_binding)
    [m async for m in first]

    assert outcome["status"] == "completed" and outcome["run_id"] != run_id
    assert not await SteeringItem.objects.filter(event_id=elsewhere.event_id).aexists()
