"""The conversation service (ADK's session service, section 7.1): create, get, list, delete,
recent entries, and state scoped by `app:` / `user:` / no prefix / `temp:`."""

from datetime import timedelta

import pytest
from django.utils import timezone

from ledger.models import AgentRunnerState, Conversation, Transcript
from ledger.selectors import conversations as selectors
from ledger.services import conversations
from ledger.services.artifacts import artifacts
from ledger.services.conversations import ConversationExists
from ledger.state_keys import StateIdentity

pytestmark = [pytest.mark.django_db, pytest.mark.backend]

IDENTITY = StateIdentity(runner_id="builtin:echo", binding_identity="agent:a1")


def open_conversation(user="u1", agent="a1", **fields):
    return conversations.create(project_id="p1", agent_id=agent, user_id=user,
                                identity=IDENTITY, **fields)


def test_create_echoes_ids_and_splits_initial_state_by_prefix():
    conversation = open_conversation(client_id="c1",
                                     state={"k": 5, "user:lang": "fr", "app:v": 1, "temp:t": 0})

    assert (conversation.client_id, conversation.user_id, conversation.agent_id) == \
        ("c1", "u1", "a1")
    assert selectors.get_state(conversation, IDENTITY) == {"k": 5, "user:lang": "fr",
                                                               "app:v": 1}
    scopes = dict(AgentRunnerState.objects.values_list("state_key", "scope"))
    assert scopes == {"k": "conversation", "lang": "actor", "v": "runner"}


def test_create_without_id_generates_one_used_as_both_ids():
    conversation = open_conversation()

    assert conversation.client_id == conversation.conversation_id


def test_the_same_id_twice_for_one_owner_and_agent_fails_with_already_have():
    open_conversation(client_id="c1")

    with pytest.raises(ConversationExists, match="already have"):
        open_conversation(client_id="c1")
    assert Conversation.objects.count() == 1


def test_ids_are_scoped_to_agent_and_owner_with_distinct_ledger_ids():
    mine = open_conversation(client_id="c1")
    theirs = open_conversation(client_id="c1", user="u2")
    other_agent = open_conversation(client_id="c1", agent="a2")

    assert len({mine.conversation_id, theirs.conversation_id, other_agent.conversation_id}) == 3
    assert selectors.get("c1", user_id="u2") == theirs


def test_get_is_owner_only():
    open_conversation(client_id="c1")

    assert selectors.get("c1", user_id="u1") is not None
    assert selectors.get("c1", user_id="u2") is None
    assert selectors.get("missing", user_id="u1") is None


def test_entries_keep_the_last_n_then_those_after_a_time():
    conversation = open_conversation(client_id="c1")
    start = timezone.now()
    for n in range(1, 6):
        entry = Transcript.objects.create(conversation_id=conversation.conversation_id,
                                          role="user", author="user", content=f"m{n}")
        Transcript.objects.filter(pk=entry.pk).update(created_at=start + timedelta(seconds=n))

    def contents(**kwargs):
        return [e.content for e in selectors.entries(conversation, **kwargs)]

    assert contents() == ["m1", "m2", "m3", "m4", "m5"]
    assert contents(limit=3) == ["m3", "m4", "m5"]
    assert contents(after=start + timedelta(seconds=2)) == ["m2", "m3", "m4", "m5"]
    assert contents(limit=2, after=start + timedelta(seconds=1)) == ["m4", "m5"]


def test_list_is_per_agent_and_user():
    open_conversation(user="u1")
    open_conversation(user="u1")
    open_conversation(user="u2")
    open_conversation(user="u1", agent="a2")

    assert selectors.list_for(agent_id="a1", user_id="u1").count() == 2
    assert selectors.list_for(agent_id="a1", user_id="u2").count() == 1
    assert selectors.list_for(agent_id="a1", user_id="nobody").count() == 0
    assert selectors.list_for(agent_id="a1").count() == 3


def test_delete_removes_entries_session_state_and_files_but_not_user_data():
    conversation = open_conversation(client_id="c1", state={"k": 1, "user:u": 2})
    key = conversation.conversation_id
    Transcript.objects.create(conversation_id=key, role="user", author="user", content="hi")
    artifacts.save("p1", "u1", key, "notes", text="x")
    artifacts.save("p1", "u1", key, "user:profile", text="y")

    conversations.delete(conversation)

    assert selectors.get("c1", user_id="u1") is None
    assert not Transcript.objects.filter(conversation_id=key).exists()
    assert list(AgentRunnerState.objects.values_list("state_key", flat=True)) == ["u"]
    assert artifacts.list_names("p1", "u1", "c2") == ["user:profile"]
    assert not Conversation.objects.exists()


def test_app_keys_are_shared_with_other_users():
    conversations.update_state(open_conversation(user="u1"), IDENTITY, {"app:motd": "hello"})

    assert selectors.get_state(open_conversation(user="u2"), IDENTITY) == {"app:motd": "hello"}


def test_user_keys_are_shared_by_one_users_conversations_only():
    conversations.update_state(open_conversation(user="u1"), IDENTITY, {"user:lang": "fr"})

    assert selectors.get_state(open_conversation(user="u1"), IDENTITY) == {"user:lang": "fr"}
    assert selectors.get_state(open_conversation(user="u2"), IDENTITY) == {}


def test_unprefixed_keys_stay_in_their_conversation():
    conversations.update_state(open_conversation(), IDENTITY, {"topic": "taxes"})

    assert selectors.get_state(open_conversation(), IDENTITY) == {}


def test_temp_keys_are_never_stored_and_none_deletes_a_key():
    conversation = open_conversation(state={"k": 1, "j": 2})

    state = conversations.update_state(conversation, IDENTITY, {"temp:scratch": 1, "k": None})

    assert state == {"j": 2}
    assert not AgentRunnerState.objects.filter(state_key__contains="scratch").exists()
