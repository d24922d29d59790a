"""`/api/v1/projects/{p}/agents/{a}/conversations`: create, list, get, update, delete, and the
artifacts of a conversation. A conversation is its opener's: anyone else gets 404."""

import base64
import hashlib
import json

import pytest

from ledger.models import AgentRunnerState, Conversation, Transcript
from runners.execution.context import state_context
from runners.tests.conversation_fixtures import (  # noqa: F401
    conversations_url,
    read_body,
    register_builtin,
    reply_results,
)

pytestmark = pytest.mark.backend


def open_conversation(client, agent, **body):
    response = client.post(conversations_url(agent), body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


# --- conversations --------------------------------------------------------------------------

def test_create_answers_201_with_generated_id_state_and_no_entries(user_client, agent):
    body = open_conversation(user_client, agent, title="Taxes", state={"k": 1, "user:lang": "fr"})

    assert body["id"] and body["agent_id"] == str(agent.pk)
    assert body["project_id"] == str(agent.project_id)
    assert (body["title"], body["state"], body["entries"]) == \
        ("Taxes", {"k": 1, "user:lang": "fr"}, [])


def test_creating_one_of_your_own_ids_again_answers_409(user_client, agent):
    open_conversation(user_client, agent, conversation_id="chat-1")

    response = user_client.post(conversations_url(agent), {"conversation_id": "chat-1"},
                                format="json")

    assert response.status_code == 409
    assert "already have" in response.json()["detail"]


def test_create_with_a_bad_id_answers_400_naming_it(user_client, agent):
    response = user_client.post(conversations_url(agent), {"conversation_id": "a/b"},
                                format="json")

    assert response.status_code == 400
    assert "conversation_id" in response.json()["errors"]


def test_terminated_agent_takes_no_new_conversation(user_client, make_agent, project, agent_type):
    gone = make_agent(project, agent_type, status="terminated")

    assert user_client.post(conversations_url(gone), {}, format="json").status_code == 410


def test_agent_of_a_project_the_caller_cannot_see_is_404(outsider_client, agent):
    assert outsider_client.post(conversations_url(agent), {}, format="json").status_code == 404
    assert outsider_client.get(conversations_url(agent)).status_code == 404


def test_list_shows_only_the_callers_conversations_with_this_agent(
        user_client, member_client, agent, make_agent):
    mine = open_conversation(user_client, agent)
    open_conversation(member_client, agent)
    open_conversation(user_client, make_agent(agent.project, agent.agent_type))

    body = user_client.get(conversations_url(agent)).json()

    assert [c["id"] for c in body["data"]] == [mine["id"]]
    assert body["pagination"]["has_next"] is False


def test_get_returns_state_and_the_last_entries_oldest_first(user_client, agent):
    conversation = open_conversation(user_client, agent, state={"k": 1})
    for n in range(5):
        Transcript.objects.create(conversation_id=conversation["id"], role="user",
                                  author="user", content=f"m{n}")

    body = user_client.get(f"{conversations_url(agent)}/{conversation['id']}?limit=2").json()

    assert [e["content"] for e in body["entries"]] == ["m3", "m4"]
    assert body["entries"][0]["author"] == "user"
    assert body["state"] == {"k": 1}


def test_bad_limit_answers_400(user_client, agent):
    conversation = open_conversation(user_client, agent)

    response = user_client.get(f"{conversations_url(agent)}/{conversation['id']}?limit=many")

    assert response.status_code == 400
    assert "limit" in response.json()["errors"]


# A state write runs on a pool thread of its own, with its own database connection: it sees
# only what is committed.
@pytest.mark.django_db(transaction=True)
def test_patch_sets_and_deletes_state_keys(user_client, agent):
    conversation = open_conversation(user_client, agent, state={"a": 1, "b": 2})

    response = user_client.patch(f"{conversations_url(agent)}/{conversation['id']}",
                                 {"title": "New", "state": {"a": None, "app:c": 3}}, format="json")

    assert response.status_code == 200
    assert (response.json()["title"], response.json()["state"]) == ("New", {"app:c": 3, "b": 2})


def test_an_after_without_a_time_zone_is_read_in_the_servers(user_client, agent):
    conversation = open_conversation(user_client, agent)
    Transcript.objects.create(conversation_id=conversation["id"], role="user", author="user",
                              content="m")
    url = f"{conversations_url(agent)}/{conversation['id']}"

    before, after = (user_client.get(url, {"after": moment}) for moment in
                     ("2000-01-01T00:00:00", "2999-01-01T00:00:00"))

    assert before.status_code == after.status_code == 200
    assert ([e["content"] for e in before.json()["entries"]],
            after.json()["entries"]) == (["m"], [])


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("state, named", [
    ({f"k{n}": n for n in range(6)}, "LANGHOST_STATE_MAX_KEYS"),
    ({"big": "x" * 300_000}, "262144"),
    # Counted as stored, escaped, as a runner's state write counts it.
    ({"accents": "é" * 100_000}, "262144"),
    ({"a": "x" * 200_000, "b": "x" * 200_000}, "LANGHOST_STATE_MAX_BYTES"),
    ({"host.pending_approval": {"calls": {}}}, "LangHost's own"),
])
def test_state_over_a_limit_is_refused_naming_it_and_nothing_is_written(user_client, agent,
                                                                       settings, state, named):
    settings.LANGHOST_STATE_MAX_KEYS, settings.LANGHOST_STATE_MAX_BYTES = 5, 300_000
    conversation = open_conversation(user_client, agent, state={"kept": 1})

    response = user_client.patch(f"{conversations_url(agent)}/{conversation['id']}",
                                 {"state": state}, format="json")

    assert response.status_code == 422 and named in response.json()["detail"]
    assert "state" in response.json()["errors"]
    assert list(AgentRunnerState.objects.values_list("state_key", flat=True)) == ["kept"]


@pytest.mark.django_db(transaction=True)
def test_keys_written_one_patch_at_a_time_are_bounded_too(user_client, agent, settings):
    settings.LANGHOST_STATE_MAX_KEYS = 5
    conversation = open_conversation(user_client, agent)
    url = f"{conversations_url(agent)}/{conversation['id']}"

    answers = [user_client.patch(url, {"state": {f"k{n}": n}}, format="json").status_code
               for n in range(6)]

    assert answers == [200] * 5 + [422]
    assert AgentRunnerState.objects.count() == 5


def test_delete_answers_204_then_the_conversation_is_gone(user_client, agent):
    conversation = open_conversation(user_client, agent, state={"k": 1})
    url = f"{conversations_url(agent)}/{conversation['id']}"
    Transcript.objects.create(conversation_id=conversation["id"], role="user", author="user")

    assert user_client.delete(url).status_code == 204

    assert user_client.get(url).status_code == 404
    assert not Transcript.objects.exists()
    assert not AgentRunnerState.objects.exists()


def test_another_users_conversation_is_404_for_get_patch_delete(user_client, member_client, agent):
    conversation = open_conversation(user_client, agent)
    url = f"{conversations_url(agent)}/{conversation['id']}"

    assert member_client.get(url).status_code == 404
    assert member_client.patch(url, {"title": "x"}, format="json").status_code == 404
    assert member_client.delete(url).status_code == 404
    assert Conversation.objects.get().title == ""


def test_conversation_state_is_the_state_the_runner_gets(user_client, agent, builtin):
    """`app:` -> runner scope, `user:` -> actor scope, bare keys -> conversation scope."""

    async def show_state(context):
        for item in reply_results(context, json.dumps(context["state"], sort_keys=True)):
            yield item

    agent.agent_type.runner_id = builtin("builtin:show-state", show_state)
    agent.agent_type.save()
    conversation = open_conversation(user_client, agent,
                                     state={"k": 1, "user:lang": "fr", "app:motd": "hi"})

    response = user_client.post(f"{conversations_url(agent)}/{conversation['id']}/messages",
                                {"text": "state?"}, format="json")

    snapshot = json.loads(json.loads(read_body(response))["reply"]["content"])
    assert snapshot["conversation"] == {"k": 1}
    assert snapshot["actor"] == {"lang": "fr"}
    assert snapshot["runner"] == {"motd": "hi"}


def test_conversation_scope_keys_match_the_runner_context(agent, user):
    from ledger.services import conversations as service
    from ledger.state_keys import conversation_scope_keys
    from runners.conversations import services as door
    from runners.conversations import targets
    from runners.conversations.callers import Caller

    conversation = service.create(project_id=str(agent.project_id), agent_id=str(agent.pk),
                                  user_id=str(user.pk), client_id="mine")
    prepared = door.prepare_agent_run(Caller(user), agent_id=agent.pk,
                                      conversation_id="mine", event_input={"text": "x"})

    context_keys = {scope: info["scope_key"] for scope, info in
                    state_context(prepared.event, prepared.binding,
                                  prepared.binding.runner_id).items()}
    keys = conversation_scope_keys(conversation, targets.state_identity(agent, conversation))

    assert {scope: context_keys[scope] for scope in keys} == keys


# --- artifacts ------------------------------------------------------------------------------

@pytest.fixture
def artifacts_url(user_client, agent):
    conversation = open_conversation(user_client, agent)
    return f"{conversations_url(agent)}/{conversation['id']}/artifacts"


def upload(client, url, name, content: bytes, mime="text/plain"):
    return client.post(url, {"name": name, "mime_type": mime,
                             "data": base64.b64encode(content).decode()}, format="json")


def test_uploads_make_versions_and_the_list_shows_the_latest(user_client, artifacts_url):
    assert upload(user_client, artifacts_url, "notes.txt", b"one").json()["version"] == 1
    second = upload(user_client, artifacts_url, "notes.txt", b"two!")
    upload(user_client, artifacts_url, "a.bin", b"\x00", "application/octet-stream")

    body = user_client.get(artifacts_url).json()

    assert second.status_code == 201 and second.json()["version"] == 2
    assert [{k: a[k] for k in ("name", "latest_version", "mime_type", "size")}
            for a in body["data"]] == [
        {"name": "a.bin", "latest_version": 1, "mime_type": "application/octet-stream", "size": 1},
        {"name": "notes.txt", "latest_version": 2, "mime_type": "text/plain", "size": 4},
    ]


def test_multipart_upload_and_download_of_latest_and_given_version(user_client, artifacts_url):
    from django.core.files.uploadedfile import SimpleUploadedFile

    user_client.post(artifacts_url, {"file": SimpleUploadedFile("r.csv", b"a,b", "text/csv")},
                     format="multipart")
    upload(user_client, artifacts_url, "r.csv", b"a,b,c", "text/csv")

    latest = user_client.get(f"{artifacts_url}/r.csv")
    first = user_client.get(f"{artifacts_url}/r.csv?version=1")

    assert (latest.status_code, read_body(latest), latest["Content-Type"]) == (
        200, b"a,b,c", "text/csv")
    assert latest.is_async and latest["Content-Length"] == "5"  # streamed, block by block
    assert latest["X-Artifact-Version"] == "2"
    assert latest["Content-Disposition"] == 'attachment; filename="r.csv"'
    assert latest["ETag"] == f'"{hashlib.sha256(b"a,b,c").hexdigest()}"'
    assert read_body(first) == b"a,b"


def test_versions_newest_first_and_delete_one_or_all(user_client, artifacts_url):
    for content in (b"1", b"2", b"3"):
        upload(user_client, artifacts_url, "f", content)

    versions = user_client.get(f"{artifacts_url}/f/versions").json()["data"]
    deleted_one = user_client.delete(f"{artifacts_url}/f?version=3")
    latest_after = read_body(user_client.get(f"{artifacts_url}/f"))
    deleted_all = user_client.delete(f"{artifacts_url}/f")

    assert [v["version"] for v in versions] == [3, 2, 1]
    assert len(versions[0]["sha256"]) == 64
    assert (deleted_one.status_code, latest_after) == (204, b"2")
    assert deleted_all.status_code == 204
    assert user_client.get(f"{artifacts_url}/f").status_code == 404
    assert user_client.delete(f"{artifacts_url}/f").status_code == 404


def test_user_scoped_artifacts_are_visible_from_the_users_other_conversations(
        user_client, agent, artifacts_url):
    upload(user_client, artifacts_url, "user:profile", b"me")
    upload(user_client, artifacts_url, "local", b"here")
    other = open_conversation(user_client, agent)

    listed = user_client.get(f"{conversations_url(agent)}/{other['id']}/artifacts").json()["data"]

    assert [a["name"] for a in listed] == ["user:profile"]


def test_backslash_in_a_name_answers_422(user_client, artifacts_url):
    response = upload(user_client, artifacts_url, "a\\b", b"x")

    assert response.status_code == 422
    assert "must not contain" in response.json()["detail"]


def test_oversize_upload_answers_413_with_the_limit(user_client, artifacts_url, settings):
    settings.LANGHOST_ARTIFACT_MAX_BYTES = 4

    response = upload(user_client, artifacts_url, "big", b"12345")

    assert response.status_code == 413
    assert "4-byte limit" in response.json()["detail"]
    assert user_client.get(artifacts_url).json()["data"] == []


def test_another_users_conversation_artifacts_are_404(user_client, member_client, artifacts_url):
    upload(user_client, artifacts_url, "secret", b"x")

    assert member_client.get(artifacts_url).status_code == 404
    assert member_client.get(f"{artifacts_url}/secret").status_code == 404
    assert upload(member_client, artifacts_url, "mine", b"x").status_code == 404


@pytest.fixture
def state_write_budget(monkeypatch):
    """`state_write_budget(rate)`: the bytes a user's state writes may take, from a fresh
    count."""
    from django.core.cache import cache

    from runners.api.throttles import StateWriteThrottle

    def budget(rate):
        cache.clear()
        monkeypatch.setattr(StateWriteThrottle, "THROTTLE_RATES", {"state-writes": rate})

    return budget


@pytest.mark.django_db(transaction=True)
def test_a_user_opens_fifty_conversations_in_a_second_under_the_default_budget(
        user_client, agent, state_write_budget):
    state_write_budget("2097152/second")  # LANGHOST_STATE_WRITE_BYTES_PER_USER's default

    answers = [user_client.post(conversations_url(agent), {}, format="json")
               for _ in range(50)]

    assert [answer.status_code for answer in answers] == [201] * 50


@pytest.mark.django_db(transaction=True)
def test_a_large_state_write_waits_while_small_ones_pass(user_client, agent, state_write_budget):
    state_write_budget("100000/minute")
    conversation = open_conversation(user_client, agent)
    url = f"{conversations_url(agent)}/{conversation['id']}"
    large = {"text": "x" * 60_000}

    first = user_client.patch(url, {"state": large}, format="json")
    second = user_client.patch(url, {"state": {"text": "y" * 60_000}}, format="json")
    small = [user_client.patch(url, {"state": {"k": n}}, format="json") for n in range(10)]

    assert first.status_code == 200
    assert second.status_code == 429
    assert 0 < int(second["Retry-After"]) <= 60
    assert [answer.status_code for answer in small] == [200] * 10
    assert user_client.get(url).json()["state"] == {**large, "k": 9}
