"""The ledger's other lists page by cursor as the runs list does: a run's events and model
calls in order, an owner's conversations by latest activity, a conversation's transcript
newest first. Walking one returns every row once, whatever is added meanwhile."""

import uuid

import pytest

from ledger.models import AgentRun, AgentRunEvent, Conversation, ModelCall, Transcript
from runners.tests.conversation_fixtures import conversations_url  # noqa: F401

pytestmark = pytest.mark.backend


def walk(client, url: str, id_of) -> list:
    """The ids of every row of every page from `url` on, following `next`."""
    ids = []
    while url:
        page = client.get(url).json()
        ids += [id_of(row) for row in page["data"]]
        url = page["pagination"]["next"]
    return ids


def a_run(**fields) -> AgentRun:
    return AgentRun.objects.create(run_id=f"r-{uuid.uuid4()}", event_id=f"e-{uuid.uuid4()}",
                                   runner_id="builtin:echo", status="completed", **fields)


def test_a_runs_events_come_in_sequence_order_a_page_at_a_time_with_their_count(
        superuser_client):
    run = a_run()
    AgentRunEvent.objects.bulk_create(AgentRunEvent(run=run, sequence=n, type="state.updated")
                                      for n in range(1, 8))

    first = superuser_client.get(f"/api/v1/runs/{run.run_id}/events?page_size=3").json()
    sequences = walk(superuser_client, f"/api/v1/runs/{run.run_id}/events?page_size=3",
                     lambda event: event["sequence"])
    after = superuser_client.get(
        f"/api/v1/runs/{run.run_id}/events?after_sequence=5").json()

    assert sequences == list(range(1, 8))
    assert first["pagination"]["total"] == 7 and first["pagination"]["has_next"]
    assert [event["sequence"] for event in after["data"]] == [6, 7]


def test_a_runs_model_calls_are_listed_to_those_who_see_the_run(superuser_client,
                                                                outsider_client):
    run = a_run()
    for attempt, status in ((1, "error"), (2, "ok")):
        ModelCall.objects.create(run_id=run.run_id, model_id="m", model_name="gpt-x",
                                 attempt=attempt, status=status, input_tokens=10 * attempt,
                                 output_tokens=attempt, cost="0.00012")

    body = superuser_client.get(f"/api/v1/runs/{run.run_id}/model-calls?page_size=1").json()
    attempts = walk(superuser_client, f"/api/v1/runs/{run.run_id}/model-calls?page_size=1",
                    lambda call: (call["attempt"], call["status"], call["input_tokens"]))

    assert attempts == [(1, "error", 10), (2, "ok", 20)]
    assert body["pagination"]["total"] == 2 and body["data"][0]["cost"] == 0.00012
    assert outsider_client.get(f"/api/v1/runs/{run.run_id}/model-calls").status_code == 404


def test_conversations_come_latest_activity_first_each_once_while_new_ones_open(
        user_client, agent):
    opened = [user_client.post(conversations_url(agent), {}, format="json").json()["id"]
              for _ in range(5)]
    url, seen = conversations_url(agent) + "?page_size=2", []
    while url:
        page = user_client.get(url).json()
        seen += [conversation["id"] for conversation in page["data"]]
        user_client.post(conversations_url(agent), {}, format="json")  # lands before page 1
        url = page["pagination"]["next"]

    assert seen == list(reversed(opened))


# A conversation's update runs on a pool thread with its own connection: it sees only what
# is committed.
@pytest.mark.django_db(transaction=True)
def test_a_conversation_that_moved_on_comes_first(user_client, agent):
    older, newer = (user_client.post(conversations_url(agent), {}, format="json").json()["id"]
                    for _ in range(2))
    moved = user_client.patch(f"{conversations_url(agent)}/{older}", {"title": "again"},
                              format="json")

    ids = walk(user_client, conversations_url(agent), lambda conversation: conversation["id"])

    assert moved.status_code == 200 and ids == [older, newer]


def test_a_conversations_transcript_pages_back_in_time_and_only_for_its_owner(
        user_client, member_client, agent):
    conversation = user_client.post(conversations_url(agent), {}, format="json").json()
    ledger_id = Conversation.objects.get(client_id=conversation["id"]).conversation_id
    entries = [Transcript.objects.create(conversation_id=ledger_id, role=role, author=role,
                                         content=f"line {n}")
               for n, role in enumerate(["user", "assistant"] * 3)]
    url = f"{conversations_url(agent)}/{conversation['id']}/messages"

    contents = walk(user_client, url + "?page_size=4", lambda entry: entry["content"])
    first = user_client.get(url + "?page_size=4").json()
    back = user_client.get(user_client.get(first["pagination"]["next"]).json()
                           ["pagination"]["previous"]).json()

    assert contents == [entry.content for entry in reversed(entries)]
    assert [entry["id"] for entry in back["data"]] == [entry["id"] for entry in first["data"]]
    assert member_client.get(url).status_code == 404
