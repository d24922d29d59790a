"""Forks and re-runs: from any entry of a conversation, a new conversation with the entries up
to there (and the session state as it was then), or the message there answered again — as it
was or edited — with a history that stops before it."""

import json
import time

import pytest

from ledger.models import Conversation, Transcript
from runners.models import LLM_AGENT_RUNNER_ID
from runners.tests.conversation_fixtures import (  # noqa: F401
    conversations_url,
    read_body,
    register_builtin,
    result,
)
from tests.fake_providers import Reply
from tests.timing import scaled

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def talker(make_agent_type, make_agent, make_model, project, openai_server):
    make_model(openai_server, "gpt-fork")
    return make_agent(project, make_agent_type(name="Talker", runner_id=LLM_AGENT_RUNNER_ID,
                                               primary_model="gpt-fork"))


def say(client, agent, conversation, text, path="messages", **body):
    if text is not None:
        body["text"] = text
    response = client.post(f"{conversations_url(agent)}/{conversation}/{path}", body,
                           format="json")
    return response, json.loads(read_body(response))


def entries(conversation_id: str) -> list[tuple[str, str]]:
    return list(Transcript.objects.filter(conversation_id=conversation_id).order_by("id")
                .values_list("role", "content"))


@pytest.fixture
def four_turns(user_client, talker, openai_server):
    """A conversation of four messages, each answered: its id and its entries' ids."""
    openai_server.script(*(Reply(text=f"answer {n}") for n in range(1, 5)))
    conversation = user_client.post(conversations_url(talker), {}, format="json").json()["id"]
    for n in range(1, 5):
        say(user_client, talker, conversation, f"message {n}")
    ids = list(Transcript.objects.filter(conversation_id=conversation).order_by("id")
               .values_list("id", flat=True))
    assert len(ids) == 8
    return conversation, ids


def users_in(call) -> list[str]:
    return [message["content"] for message in call.body["messages"] if message["role"] == "user"]


def test_a_rerun_from_the_second_message_sends_the_model_the_first_two_only(
        user_client, talker, openai_server, four_turns):
    conversation, ids = four_turns
    openai_server.script(Reply(text="answer 2, again"))

    response, body = say(user_client, talker, conversation, None, "rerun", entry_id=ids[2])

    assert response.status_code == 201, body
    assert body["status"] == "completed" and body["reply"]["content"] == "answer 2, again"
    sent = openai_server.calls()[-1].body["messages"]
    assert users_in(openai_server.calls()[-1]) == ["message 1", "message 2"]
    assert [m["content"] for m in sent if m["role"] == "assistant"] == ["answer 1"]
    fork = body["conversation_id"]
    assert response["Location"].endswith(f"/conversations/{fork}")
    assert entries(fork) == [("user", "message 1"), ("assistant", "answer 1"),
                             ("user", "message 2"), ("assistant", "answer 2, again")]
    assert len(entries(conversation)) == 8  # the original is left as it was


def test_a_rerun_from_a_reply_answers_its_message_again_and_can_be_edited(
        user_client, talker, openai_server, four_turns):
    conversation, ids = four_turns
    openai_server.script(Reply(text="edited answer"))

    response, body = say(user_client, talker, conversation, "message 3, edited", "rerun",
                         entry_id=ids[5])

    assert response.status_code == 201, body
    assert users_in(openai_server.calls()[-1]) == ["message 1", "message 2",
                                                   "message 3, edited"]
    assert entries(body["conversation_id"])[-2:] == [("user", "message 3, edited"),
                                                     ("assistant", "edited answer")]


def test_a_fork_is_a_new_conversation_with_the_entries_up_to_there(
        user_client, talker, openai_server, four_turns):
    conversation, ids = four_turns

    forked = user_client.post(f"{conversations_url(talker)}/{conversation}/fork",
                              {"entry_id": ids[3]}, format="json")

    assert forked.status_code == 201, forked.json()
    fork = forked.json()
    assert fork["id"] != conversation
    assert [entry["content"] for entry in fork["entries"]] == [
        "message 1", "answer 1", "message 2", "answer 2"]
    openai_server.script(Reply(text="carrying on"))
    say(user_client, talker, fork["id"], "message 3 in the fork")
    assert users_in(openai_server.calls()[-1]) == ["message 1", "message 2",
                                                   "message 3 in the fork"]


def test_a_fork_carries_the_session_state_as_it_was_at_that_entry(
        user_client, builtin, make_agent_type, make_agent, project):
    async def counter(context):
        count = ((context.get("state") or {}).get("conversation") or {}).get("count", 0) + 1
        yield result(context, 1, "state.updated",
                     {"scope": "conversation", "key": "count", "value": count})
        yield result(context, 2, "message.completed",
                     {"message": {"role": "assistant", "content": f"count {count}"}})
        yield result(context, 3, "run.completed", {"finish_reason": "stop"})

    agent = make_agent(project, make_agent_type(runner_id=builtin("builtin:counter", counter)))
    conversation = user_client.post(conversations_url(agent), {}, format="json").json()["id"]
    for _ in range(3):
        say(user_client, agent, conversation, "count")
    first_reply = Transcript.objects.filter(conversation_id=conversation,
                                            role="assistant").order_by("id").first()

    fork = user_client.post(f"{conversations_url(agent)}/{conversation}/fork",
                            {"entry_id": first_reply.pk}, format="json").json()

    assert fork["state"] == {"count": 1}
    _, body = say(user_client, agent, fork["id"], "count")
    assert body["reply"]["content"] == "count 2"


def test_nobody_forks_or_reruns_a_conversation_that_is_not_theirs(
        user_client, outsider_client, talker, four_turns):
    conversation, ids = four_turns
    url = f"{conversations_url(talker)}/{conversation}"

    assert outsider_client.post(f"{url}/fork", {"entry_id": ids[0]},
                             format="json").status_code == 404
    assert outsider_client.post(f"{url}/rerun", {"entry_id": ids[0]},
                             format="json").status_code == 404
    missing = user_client.post(f"{url}/fork", {"entry_id": 10**9}, format="json")
    assert missing.status_code == 422 and "entry_id" in json.dumps(missing.json())


def test_the_conversation_page_forks_at_an_entry_and_reruns_an_edited_message(
        admin_browser, superuser_client, talker, openai_server):
    openai_server.script(Reply(text="answer 1"), Reply(text="answer 2"))
    conversation = superuser_client.post(conversations_url(talker), {},
                                         format="json").json()["id"]
    for n in (1, 2):
        say(superuser_client, talker, conversation, f"message {n}")
    original = Conversation.objects.get(client_id=conversation)
    first_answer, second_message = Transcript.objects.filter(
        conversation_id=original.conversation_id).order_by("id")[1:3]
    page = admin_browser.get(f"/admin/ledger/conversation/{original.pk}/change/")
    assert "Fork here" in page.content.decode()

    forked = admin_browser.post(
        f"/admin/conversations/{original.pk}/entries/{first_answer.pk}/fork/", follow=True)

    fork = Conversation.objects.exclude(pk=original.pk).get()
    assert forked.redirect_chain[-1][0] == f"/admin/ledger/conversation/{fork.pk}/change/"
    assert entries(fork.conversation_id) == [("user", "message 1"), ("assistant", "answer 1")]
    assert "Forked from" in forked.content.decode()
    assert f"/admin/ledger/conversation/{fork.pk}/change/" in admin_browser.get(
        f"/admin/ledger/conversation/{original.pk}/change/").content.decode()  # its forks
    run_page = admin_browser.get(f"/admin/runs/{first_answer.run_id}/", follow=True)
    assert 'class="conversation-fork"' in run_page.content.decode()

    openai_server.script(Reply(text="answer 2, edited"))
    response = admin_browser.post(
        f"/admin/conversations/{original.pk}/entries/{second_message.pk}/rerun/",
        {"text": "message 2, edited"})
    assert response.status_code == 302
    rerun = Conversation.objects.exclude(pk__in=[original.pk, fork.pk]).get()
    assert response["Location"] == f"/admin/ledger/conversation/{rerun.pk}/change/"
    give_up = time.monotonic() + scaled(20)
    while len(entries(rerun.conversation_id)) < 4:  # the run goes on in the background
        assert time.monotonic() < give_up, entries(rerun.conversation_id)
        time.sleep(0.05)
    assert entries(rerun.conversation_id) == [
        ("user", "message 1"), ("assistant", "answer 1"),
        ("user", "message 2, edited"), ("assistant", "answer 2, edited")]
