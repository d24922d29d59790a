"""A message that arrives while its conversation has an active run: enqueued (run after it,
in order, reading its reply), rejected (409 naming it), or interrupting it — the agent type's
strategy, or the request's."""

import asyncio

import pytest
from asgiref.sync import sync_to_async

from ledger.models import AgentRun, Conversation, RunStatus, Transcript
from ledger.services import conversations
from runners.conversations import background
from runners.conversations import services as door
from runners.conversations.callers import Caller
from runners.conversations.exceptions import InvalidInput
from runners.conversations.input import Part
from runners.protocol import ConversationBusy
from runners.runtime.host_process import host_process
from runners.tests.conversation_fixtures import (  # noqa: F401
    conversations_url,
    read_body,
    register_builtin,
    reply_results,
)
from tests.timing import scaled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.backend]

RUNNER = "builtin:test-turns"


@pytest.fixture
def turns_agent(builtin, agent, agent_type):
    """An agent whose runner waits `wait:<seconds>` and answers with what its conversation's
    transcript held when it started."""

    async def run(context):
        text = context["input"]["text"]
        seen = await sync_to_async(lambda: [row.content for row in Transcript.objects.filter(
            conversation_id=context["conversation"]["conversation_id"]).order_by("id")])()
        if text.startswith("wait:"):
            await asyncio.sleep(float(text.split(":")[1]))
        for item in reply_results(context, f"{text} saw {seen}"):
            yield item

    builtin(RUNNER, run)
    agent_type.runner_id = RUNNER
    agent_type.save()
    return agent


async def new_conversation(user, agent):
    return await sync_to_async(conversations.create)(
        project_id=str(agent.project_id), agent_id=str(agent.pk), user_id=str(user.pk))


async def send(user, agent, conversation, text, multitask=None) -> dict:
    prepared = await sync_to_async(door.prepare_agent_run)(
        Caller(user), agent_id=agent.pk, conversation_id=conversation.client_id,
        parts=[Part(text=text)], multitask=multitask)
    return await door.run_to_end(prepared)


async def two_messages(user, agent, multitask=None, first="wait:1"):
    """Two messages 50 ms apart to one conversation: (first outcome, second outcome)."""
    conversation = await new_conversation(user, agent)
    first_run = asyncio.create_task(send(user, agent, conversation, first, multitask))
    await asyncio.sleep(0.05)
    second = await asyncio.gather(send(user, agent, conversation, "second", multitask),
                                  return_exceptions=True)
    return await first_run, second[0]


def run_rows(*run_ids):
    return {run.run_id: run for run in AgentRun.objects.filter(run_id__in=run_ids)}


async def test_enqueued_message_runs_after_the_active_run_and_reads_its_reply(user, turns_agent):
    first, second = await two_messages(user, turns_agent)

    assert (first["status"], second["status"]) == ("completed", "completed")
    rows = await sync_to_async(run_rows)(first["run_id"], second["run_id"])
    assert rows[second["run_id"]].started_at >= rows[first["run_id"]].finished_at
    reply = second["messages"][0]["data"]["message"]["content"]
    assert "wait:1 saw" in reply  # the first run's reply was in its history when it started
    transcript = await sync_to_async(lambda: [row.content for row in Transcript.objects.filter(
        conversation_id=rows[first["run_id"]].conversation_id).order_by("id")])()
    assert transcript[0] == "wait:1" and transcript[1].startswith("wait:1 saw")
    assert transcript[2] == "second" and transcript[3].startswith("second saw")


async def test_queued_messages_run_one_at_a_time_in_arrival_order(user, turns_agent):
    conversation = await new_conversation(user, turns_agent)
    sent = []
    for text in ("wait:0.5", "wait:0.1", "wait:0", "last"):
        sent.append(asyncio.create_task(send(user, turns_agent, conversation, text)))
        await asyncio.sleep(0.05)
    outcomes = await asyncio.gather(*sent)

    rows = await sync_to_async(run_rows)(*[outcome["run_id"] for outcome in outcomes])
    runs = [rows[outcome["run_id"]] for outcome in outcomes]
    assert [run.status for run in runs] == ["completed"] * 4
    for before, after in zip(runs, runs[1:], strict=False):
        assert after.started_at >= before.finished_at


async def test_a_queued_run_shows_as_queued_until_its_turn(user, turns_agent):
    conversation = await new_conversation(user, turns_agent)
    first = asyncio.create_task(send(user, turns_agent, conversation, "wait:1"))
    await asyncio.sleep(0.05)
    prepared = await sync_to_async(door.prepare_agent_run)(
        Caller(user), agent_id=turns_agent.pk, conversation_id=conversation.client_id,
        parts=[Part(text="second")])
    started = await background.start_in_background(prepared)

    assert started["status"] == "queued"
    assert await AgentRun.objects.filter(run_id=prepared.run_id).values_list(
        "status", flat=True).aget() == RunStatus.QUEUED
    await first
    for _ in range(int(scaled(100))):
        if await AgentRun.objects.filter(run_id=prepared.run_id,
                                         status=RunStatus.COMPLETED).aexists():
            break
        await asyncio.sleep(0.05)
    else:
        pytest.fail("the queued run never ran")


async def test_reject_refuses_the_second_message_naming_the_active_run(user, turns_agent):
    first, second = await two_messages(user, turns_agent, "reject")

    assert first["status"] == "completed"
    assert isinstance(second, ConversationBusy)
    assert second.run_id == first["run_id"]
    assert await AgentRun.objects.acount() == 1  # nothing of the second was written


async def test_interrupt_cancels_the_active_run_and_then_answers(user, turns_agent):
    first, second = await two_messages(user, turns_agent, "interrupt", first="wait:30")

    assert first["status"] == "cancelled"
    assert second["status"] == "completed"
    rows = await sync_to_async(run_rows)(first["run_id"], second["run_id"])
    assert rows[second["run_id"]].started_at >= rows[first["run_id"]].finished_at


async def test_the_agent_types_strategy_applies_when_the_request_names_none(
        user, turns_agent, agent_type):
    agent_type.multitask_strategy = "reject"
    await agent_type.asave()

    _, second = await two_messages(user, turns_agent)

    assert isinstance(second, ConversationBusy)


async def test_steer_for_a_runner_that_does_not_steer_is_refused_naming_the_field(
        user, turns_agent):
    conversation = await new_conversation(user, turns_agent)

    with pytest.raises(InvalidInput) as refused:
        await send(user, turns_agent, conversation, "hi", "steer")

    assert refused.value.field == "multitask_strategy"


async def eventually(probe, what: str):
    """What `probe()` finds, once it finds something (within a scaled deadline)."""
    for _ in range(int(scaled(200))):
        if (found := await probe()) is not None:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"{what}: not within {scaled(10):.0f} s")


async def queued_then_orphaned(user, agent, conversation, text: str):
    """`(first, queued)`: a first message's run going on (a task), and a second message's run
    queued behind it whose process went away (its lease run out)."""
    first = asyncio.create_task(send(user, agent, conversation, f"wait:{scaled(2.0)}"))
    await eventually(AgentRun.objects.filter(status=RunStatus.RUNNING).afirst,
                     "the first run running")
    second = asyncio.create_task(send(user, agent, conversation, text))
    queued = await eventually(AgentRun.objects.filter(status=RunStatus.QUEUED).afirst,
                              "the second run queued")
    second.cancel()  # its waiter stops (and cancels it) ...
    await asyncio.gather(second, return_exceptions=True)
    # ... as if its process had died instead: still queued, its lease run out
    await AgentRun.objects.filter(run_id=queued.run_id).aupdate(
        status=RunStatus.QUEUED, cancel_requested_at=None, finished_at=None,
        execution_owner_id="elsewhere:1:1:gone", lease_expires_at=queued.created_at)
    return first, queued


async def test_a_queued_run_whose_process_went_away_is_started_by_another(user, turns_agent):
    conversation = await new_conversation(user, turns_agent)
    first, queued = await queued_then_orphaned(user, turns_agent, conversation, "second")

    adopted = await background.resume_orphaned_runs()
    await first

    assert adopted == [queued.run_id]
    for _ in range(int(scaled(100))):
        run = await AgentRun.objects.aget(run_id=queued.run_id)
        if run.is_terminal:
            break
        await asyncio.sleep(0.05)
    assert run.status == "completed"
    assert run.execution_owner_id == host_process().owner_id


def test_reject_over_http_is_409_naming_the_active_run(user_client, turns_agent):
    conversation = user_client.post(conversations_url(turns_agent), {}, format="json").json()
    url = f"{conversations_url(turns_agent)}/{conversation['id']}/messages"
    running = AgentRun.objects.create(
        run_id="active-run", event_id="e1", runner_id=RUNNER, status=RunStatus.RUNNING,
        conversation_id=Conversation.objects.get(client_id=conversation["id"]).conversation_id)

    response = user_client.post(url, {"text": "hi", "multitask_strategy": "reject"},
                                format="json")
    body = response.json() if response.status_code != 201 else read_body(response)

    assert response.status_code == 409, body
    assert body["active_run_id"] == running.run_id
    bad = user_client.post(url, {"text": "hi", "multitask_strategy": "later"}, format="json")
    assert bad.status_code == 400 and "multitask_strategy" in bad.json()["errors"]


async def test_a_retried_message_replays_its_run_and_interrupts_nothing(user, turns_agent):
    conversation = await new_conversation(user, turns_agent)

    async def send_once(multitask):
        prepared = await sync_to_async(door.prepare_agent_run)(
            Caller(user), agent_id=turns_agent.pk, conversation_id=conversation.client_id,
            parts=[Part(text="wait:0.5")], multitask=multitask, event_id="the-same-message")
        return await door.run_to_end(prepared)

    first = asyncio.create_task(send_once("interrupt"))
    await asyncio.sleep(0.1)
    retried = await send_once("interrupt")
    rejected_retry = await send_once("reject")

    assert (await first)["status"] == "completed"  # not interrupted by its own retry
    assert retried["run_id"] == rejected_retry["run_id"] == (await first)["run_id"]
    assert await AgentRun.objects.acount() == 1
