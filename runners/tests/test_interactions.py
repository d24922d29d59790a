"""A plugin runner asks a person (LangBot's `interaction.requested`) in the real runtime: the
question reaches the caller as a frame with a one-time token (the ledger keeps its hash
only), the answer starts a run of the same runner that replies with the choice; an answer is
taken once, not after expiry, and from nobody but the conversation's user."""

import hashlib
from datetime import timedelta
from types import SimpleNamespace

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from ledger.models import AgentRun, AgentRunEvent, Interaction
from runners.conversations import interactions
from runners.conversations import services as door
from runners.conversations.callers import Caller
from runners.conversations.exceptions import AlreadyAnswered, Expired, InvalidInput, NotFound
from runners.conversations.input import Part
from runners.models import AgentInstance, AgentType
from runners.tests.conversation_fixtures import through_the_door
from tests.timing import scaled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

CONFIRM = "plugin:e2e/agent-runner-qa/confirm"


@pytest.fixture
async def asker(own_gateway, project):
    gateway = await own_gateway("e2e__agent-runner-qa")
    await gateway.discover(scaled(30))
    agent_type = await AgentType.objects.acreate(name="Asker", slug="asker", runner_id=CONFIRM)
    return await AgentInstance.objects.acreate(name="Asker", project=project,
                                               agent_type=agent_type)


async def ask(user, agent, text="deploy"):
    """(the asking run's outcome, its interaction frame, the conversation)."""
    outcome, conversation = await through_the_door(user, agent, [Part(text=text)])
    frames = [m for m in outcome["messages"] if m["type"] == "interaction.requested"]
    return outcome, frames, conversation


async def answer(user, agent, conversation, frame, **given):
    prepared = await sync_to_async(interactions.prepare_answer)(
        Caller(user), agent_id=agent.pk, conversation_id=conversation.client_id,
        interaction_id=frame["data"]["interaction_id"],
        **{"token": frame["data"]["token"], "action_id": "yes", **given})
    return await door.run_to_end(prepared)


async def test_the_question_arrives_as_a_frame_and_the_answer_resumes_the_runner(user, asker):
    asked, (frame,), conversation = await ask(user, asker)

    assert asked["status"] == "completed"
    assert frame["data"]["kind"] == "confirmation"
    assert [a["id"] for a in frame["data"]["actions"]] == ["yes", "no"]
    token = frame["data"]["token"]
    stored = await Interaction.objects.aget(run_id=asked["run_id"])
    assert stored.token_hash == hashlib.sha256(token.encode()).hexdigest()
    events = [e.data_json async for e in AgentRunEvent.objects.filter(run_id=asked["run_id"])]
    assert token not in str(events) and token not in str(stored.request_json)

    resumed = await answer(user, asker, conversation, frame, values={"note": "ship it"})

    assert resumed["status"] == "completed", resumed
    reply = resumed["messages"][-1]["data"]["message"]["content"]
    assert reply == "you chose yes (ship it)"
    run = await AgentRun.objects.aget(run_id=resumed["run_id"])
    assert (run.runner_id, run.metadata_json["event_type"]) == (CONFIRM, "interaction.submitted")
    stored = await Interaction.objects.aget(pk=stored.pk)
    assert (stored.status, stored.resume_run_id) == ("submitted", resumed["run_id"])
    assert stored.submission_json["values"] == {"note": "ship it"}


async def test_an_answer_is_taken_once(user, asker):
    _, (frame,), conversation = await ask(user, asker)
    await answer(user, asker, conversation, frame)

    with pytest.raises(AlreadyAnswered):
        await answer(user, asker, conversation, frame, action_id="no")
    assert await AgentRun.objects.acount() == 2  # the question's run and one answer's


async def test_an_expiry_past_any_date_is_the_latest_allowed(user, asker, settings):
    asked, (frame,), _ = await ask(user, asker, text=f"expires:{10**20}")

    assert asked["status"] == "completed"
    stored = await Interaction.objects.aget(run_id=asked["run_id"])
    assert frame["data"]["expires_at"] == int(stored.expires_at.timestamp())
    assert stored.expires_at > stored.created_at + timedelta(
        seconds=settings.LANGHOST_INTERACTION_MAX_SECONDS - 60)


async def test_an_expired_question_is_gone(user, asker, monkeypatch):
    _, (frame,), conversation = await ask(user, asker, "expires:1")
    two_seconds_later = timezone.now() + timedelta(seconds=2)
    monkeypatch.setattr(interactions, "timezone", SimpleNamespace(now=lambda: two_seconds_later))

    with pytest.raises(Expired):
        await answer(user, asker, conversation, frame)


async def test_someone_elses_conversation_or_a_wrong_token_is_not_found(
        user, outsider, asker, project):
    _, (frame,), conversation = await ask(user, asker)
    await sync_to_async(project.members.add)(outsider)

    with pytest.raises(NotFound):
        await answer(outsider, asker, conversation, frame)
    with pytest.raises(NotFound):
        await answer(user, asker, conversation, frame, token="not-the-token")
    assert await Interaction.objects.filter(status="pending").aexists()


async def test_an_answer_the_question_does_not_allow_is_refused_naming_the_field(user, asker):
    _, (frame,), conversation = await ask(user, asker)

    with pytest.raises(InvalidInput) as refused:
        await answer(user, asker, conversation, frame, action_id="maybe")
    assert refused.value.field == "action_id"
    with pytest.raises(InvalidInput) as refused:
        await answer(user, asker, conversation, frame, values={"note": 5})
    assert refused.value.field == "values.note"
    assert await Interaction.objects.filter(status="pending").aexists()


async def test_no_other_door_passes_an_answer_on(user, asker):
    _, (frame,), conversation = await ask(user, asker)

    with pytest.raises(InvalidInput) as as_event:
        await sync_to_async(door.prepare_agent_run)(
            Caller(user), agent_id=asker.pk, conversation_id=conversation.client_id,
            event_type="interaction.submitted", event_input={"text": "yes"})
    with pytest.raises(InvalidInput) as as_input:
        await sync_to_async(door.prepare_agent_run)(
            Caller(user), agent_id=asker.pk, conversation_id=conversation.client_id,
            event_input={"text": "yes", "interaction": {
                "interaction_id": frame["data"]["interaction_id"], "action_id": "yes"}})

    assert (as_event.value.field, as_input.value.field) == ("event", "input")
    assert await Interaction.objects.filter(status="pending").aexists()
