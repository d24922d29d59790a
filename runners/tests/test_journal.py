"""How a run's results reach the ledger: committed before a caller who is shown them as they
come sees them, gathered into fewer transactions for one who waits for the end."""

import asyncio

import pytest
from channels.layers import get_channel_layer

from ledger.selectors import runs as readers
from ledger.services import runs as ledger
from runners.execution import journal, orchestrator
from runners.execution.orchestrator import Orchestrator
from runners.protocol import AgentBinding, AgentEventEnvelope, new_run_id
from tests.timing import scaled

pytestmark = [pytest.mark.processes, pytest.mark.backend, pytest.mark.asyncio(loop_scope="session"), pytest.mark.django_db(transaction=True)]

ECHO = "plugin:e2e/agent-runner-qa/default"
SLOW = "plugin:e2e/agent-runner-qa/slow"


def binding(runner_id: str) -> AgentBinding:
    return AgentBinding(binding_id="journal", runner_id=runner_id,
                        state_policy={"state_scopes": ["conversation"]})


@pytest.fixture
def writes(monkeypatch) -> list[list[str]]:
    """The event types of each `record_results` transaction, in order; "start" first when the
    run's own rows went with them."""
    seen, record = [], ledger.record_results

    async def recording(run_id, results, model_calls=(), start=None):
        seen.append(["start"] * (start is not None) + [result.type for result in results])
        return await record(run_id, results, model_calls, start)

    monkeypatch.setattr(ledger, "record_results", recording)
    return seen


async def test_a_short_run_its_caller_waits_for_is_written_in_one_transaction(qa_gateway,
                                                                               writes,
                                                                               monkeypatch):
    # What ends within the start's patience: however slow the machine, the echo does (a long
    # patience costs nothing when the echo ends at once).
    monkeypatch.setattr(journal, "START_PATIENCE_SECONDS", scaled(5.0))
    event = AgentEventEnvelope(conversation_id="journal", input={"text": "hi"})

    outcome = await Orchestrator(qa_gateway).run_to_end(event, binding(ECHO), wait_durable=False)

    assert outcome["status"] == "completed"
    assert writes == [["start", "message.completed", "state.updated", "run.completed"]]


async def test_a_streamed_run_commits_each_message_before_its_caller_sees_it(qa_gateway, writes):
    event = AgentEventEnvelope(conversation_id="journal", input={"text": "hi"})
    committed_when_seen = []

    async for message in Orchestrator(qa_gateway).run(event, binding(ECHO)):
        committed_when_seen.append(
            (message.type, any(message.type in batch for batch in writes)))

    assert committed_when_seen == [("message.completed", True)]


async def test_the_results_right_behind_a_message_join_its_transaction(qa_gateway, writes,
                                                                       monkeypatch):
    # Long enough for a loaded machine, where the runner's next result can come later than
    # the start's and a linger's few milliseconds: each is waited out only if nothing follows.
    monkeypatch.setattr(orchestrator, "REPLY_PATIENCE", scaled(30.0))
    monkeypatch.setattr(journal, "START_PATIENCE_SECONDS", scaled(30.0))
    monkeypatch.setattr(journal, "LINGER_SECONDS", scaled(30.0))
    event = AgentEventEnvelope(conversation_id="journal", input={"text": "hi"})

    seen = [message.type async for message in Orchestrator(qa_gateway).run(event, binding(ECHO))]

    assert seen == ["message.completed"]
    assert writes == [["start", "message.completed", "state.updated", "run.completed"]]


async def test_a_message_nothing_follows_within_the_patience_goes_out_on_its_own(
        qa_gateway, writes, monkeypatch):
    monkeypatch.setattr(orchestrator, "REPLY_PATIENCE", 0.0)
    event = AgentEventEnvelope(conversation_id="journal", input={"text": "hi"})
    run_id = new_run_id()

    seen = [message.type async for message in Orchestrator(qa_gateway).run(
        event, binding(ECHO), run_id=run_id)]

    assert seen == ["message.completed"]
    # The start goes with the message, or before it when the message is slow to come.
    assert writes[-1] == ["state.updated", "run.completed"]
    assert [kind for batch in writes[:-1] for kind in batch] == ["start", "message.completed"]
    assert (await readers.run_outcome(run_id))["status"] == "completed"


async def test_streamed_text_is_never_held(qa_gateway, writes, monkeypatch):
    monkeypatch.setattr(orchestrator, "REPLY_PATIENCE", scaled(60))
    # The start waits for the first result however late it comes on a loaded machine.
    monkeypatch.setattr(journal, "START_PATIENCE_SECONDS", scaled(30.0))
    event = AgentEventEnvelope(input={"text": f"deltas:2:{scaled(0.5)}"})
    seen_while_running = []

    async for message in Orchestrator(qa_gateway).run(event, binding(SLOW)):
        if message.type == "message.delta":
            seen_while_running.append((message.data["chunk"]["content"], len(writes)))

    # The first delta went out, committed on its own, before the second one came.
    assert seen_while_running == [("delta 1", 1), ("delta 2", 2)]
    assert writes[0] == ["start", "message.delta"]


async def test_live_viewers_see_a_waited_for_runs_results_while_it_goes_on(qa_gateway):
    layer, run_id = get_channel_layer(), new_run_id()
    viewer = await layer.new_channel()
    await layer.group_add(f"run.{run_id}", viewer)
    event = AgentEventEnvelope(input={"text": f"deltas:2:{scaled(2)}"})
    run = asyncio.ensure_future(Orchestrator(qa_gateway).run_to_end(
        event, binding(SLOW), run_id=run_id, wait_durable=False))
    try:
        first = await asyncio.wait_for(layer.receive(viewer), scaled(10))
        still_running = not run.done()
        outcome = await asyncio.wait_for(run, scaled(20))
    finally:
        run.cancel()
        await layer.group_discard(f"run.{run_id}", viewer)

    assert [(event["type"], event["data"]["chunk"]["content"]) for event in first["events"]] \
        == [("message.delta", "delta 1")]
    assert still_running
    assert outcome["status"] == "completed"


async def test_a_message_held_when_the_run_fails_still_reaches_its_caller(qa_gateway, settings,
                                                                          monkeypatch):
    monkeypatch.setattr(orchestrator, "REPLY_PATIENCE", scaled(1.0))
    # Room for the echo's reply, not for the state write right behind it: the run fails there.
    settings.LANGHOST_RUN_MAX_STORED_BYTES = 100
    event = AgentEventEnvelope(conversation_id="journal", input={"text": "hi"})
    run_id = new_run_id()

    seen = [message.type async for message in Orchestrator(qa_gateway).run(
        event, binding(ECHO), run_id=run_id)]

    outcome = await readers.run_outcome(run_id)
    assert seen == ["message.completed"]
    assert outcome["status"] == "failed" and "run.output_limit" in outcome["status_reason"]


async def test_a_run_whose_id_was_given_out_is_written_before_it_runs(qa_gateway, writes):
    event = AgentEventEnvelope(conversation_id="journal", input={"text": "hi"})
    run_id = new_run_id()

    async for _ in Orchestrator(qa_gateway).run(event, binding(ECHO), run_id=run_id,
                                                announced=True):
        pass

    assert "start" not in sum(writes, [])
    assert (await readers.run_outcome(run_id))["status"] == "completed"


async def test_a_replayable_event_is_journaled_before_its_run_starts(qa_gateway, writes):
    event = AgentEventEnvelope(conversation_id="journal", idempotency_key="order-7",
                               input={"text": "hi"})

    first = await Orchestrator(qa_gateway).run_to_end(event, binding(ECHO), wait_durable=False)
    again = await Orchestrator(qa_gateway).run_to_end(event, binding(ECHO), wait_durable=False)

    assert "start" not in sum(writes, [])
    assert again["run_id"] == first["run_id"] and again["status"] == "completed"


async def test_a_run_that_takes_longer_than_its_start_may_wait_is_seen_running(qa_gateway):
    event = AgentEventEnvelope(input={"text": f"deltas:2:{scaled(2)}"})
    run_id = new_run_id()
    run = asyncio.ensure_future(Orchestrator(qa_gateway).run_to_end(
        event, binding(SLOW), run_id=run_id, wait_durable=False))
    try:
        status = None
        for _ in range(100):
            status = (await readers.run_outcome(run_id) or {}).get("status")
            if status is not None:
                break
            await asyncio.sleep(scaled(0.02))
        still_running = not run.done()
        await asyncio.wait_for(run, scaled(20))
    finally:
        run.cancel()

    assert (status, still_running) == ("running", True)
