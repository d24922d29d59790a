"""Conversations: a user's sessions with one agent instance, after ADK's session service.

A conversation's entries are the `transcript` rows with its id (the orchestrator writes them:
the user's message, author "user", and each run's reply, author = the answering agent).

State keys are scoped by prefix, as in ADK, and stored in the ledger's runner state
(`agent_runner_state`) under the scope the runner's own context uses, so a runner bound to the
conversation's agent sees the same values in its state snapshot:

| key prefix  | ADK scope                   | ledger scope   | scope identity                      |
|-------------|-----------------------------|----------------|-------------------------------------|
| `app:`      | every user and session      | `runner`       | runner + binding + project          |
| `user:`     | every session of one user   | `actor`        | + actor (`user`, user id)           |
| (none)      | this session                | `conversation` | + conversation id                   |
| `temp:`     | one invocation              | never stored   |                                     |

The runner and binding come from the caller (`StateIdentity`: for an agent instance, its
binding `agent:<instance id>` and its type's runner), since the ledger imports no runner code.
The prefix is stripped when stored and put back when read.
"""

import uuid
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from ledger.models import AgentRunnerState, Conversation, StateScope, Transcript
from ledger.services.artifacts import artifacts
from ledger.services.runs import StateWrite, _upsert_state
from ledger.state_keys import scope_key

APP_PREFIX = "app:"
USER_PREFIX = "user:"
TEMP_PREFIX = "temp:"
PREFIX_SCOPES = ((APP_PREFIX, StateScope.RUNNER), (USER_PREFIX, StateScope.ACTOR),
                 ("", StateScope.CONVERSATION))


class ConversationExists(Exception):
    def __init__(self, conversation_id: str):
        self.conversation_id = conversation_id
        super().__init__(f"Conversation '{conversation_id}' already exists.")


@dataclass(frozen=True)
class StateIdentity:
    """Which runner state a conversation's state is: the agent's runner and binding."""

    runner_id: str
    binding_identity: str


def _identity(conversation: Conversation, identity: StateIdentity) -> dict:
    return {
        "runner_id": identity.runner_id, "binding_identity": identity.binding_identity,
        "project_id": conversation.project_id, "conversation_id": conversation.conversation_id,
        "thread_id": "", "actor_type": "user", "actor_id": conversation.user_id,
        "subject_type": "", "subject_id": "",
    }


def scope_keys(conversation: Conversation, identity: StateIdentity) -> dict[str, str]:
    """`{ledger scope: scope key}` for the three stored scopes of a conversation."""
    fields = _identity(conversation, identity)
    keys = {}
    for _prefix, scope in PREFIX_SCOPES:
        keys[scope] = scope_key(
            scope, runner_id=fields["runner_id"], binding_identity=fields["binding_identity"],
            project_id=fields["project_id"], conversation_id=fields["conversation_id"],
            actor_type=fields["actor_type"], actor_id=fields["actor_id"],
        )
    return keys


def split_key(key: str) -> tuple[str, str] | None:
    """`(ledger scope, stored key)` for a prefixed key; None for `temp:` keys."""
    if key.startswith(TEMP_PREFIX):
        return None
    for prefix, scope in PREFIX_SCOPES:
        if prefix and key.startswith(prefix):
            return scope, key[len(prefix):]
    return StateScope.CONVERSATION, key


def get_state(conversation: Conversation, identity: StateIdentity) -> dict:
    """The merged state: `app:` and `user:` keys with their prefix, session keys bare."""
    keys = scope_keys(conversation, identity)
    prefixes = {keys[scope]: prefix for prefix, scope in PREFIX_SCOPES}
    rows = AgentRunnerState.objects.filter(scope_key__in=list(prefixes)).order_by("state_key")
    return {prefixes[key] + state_key: value
            for key, state_key, value in rows.values_list("scope_key", "state_key", "value_json")}


def update_state(conversation: Conversation, identity: StateIdentity, delta: dict) -> dict:
    """Apply a delta (a `None` value deletes the key; `temp:` keys are dropped); return the
    merged state."""
    keys = scope_keys(conversation, identity)
    fields = _identity(conversation, identity)
    with transaction.atomic():
        for key, value in (delta or {}).items():
            target = split_key(key)
            if target is None or not target[1]:
                continue
            scope, state_key = target
            if value is None:
                AgentRunnerState.objects.filter(scope_key=keys[scope], state_key=state_key).delete()
            else:
                _upsert_state(StateWrite(scope=scope, scope_key=keys[scope], state_key=state_key,
                                         value=value, identity=fields))
    return get_state(conversation, identity)


def create(*, project_id: str, agent_id: str, user_id: str, conversation_id: str | None = None,
           title: str = "", state: dict | None = None,
           identity: StateIdentity | None = None) -> Conversation:
    """A new conversation (generated id unless given); ConversationExists for a taken id."""
    conversation_id = conversation_id or str(uuid.uuid4())
    try:
        with transaction.atomic():
            conversation = Conversation.objects.create(
                conversation_id=conversation_id, project_id=project_id, agent_id=agent_id,
                user_id=user_id, title=title or "",
            )
            if state and identity is not None:
                update_state(conversation, identity, state)
    except IntegrityError:
        if Conversation.objects.filter(conversation_id=conversation_id).exists():
            raise ConversationExists(conversation_id) from None
        raise
    return conversation


def get(conversation_id: str, *, user_id: str, agent_id: str | None = None) -> Conversation | None:
    """The user's conversation; None when missing or someone else's."""
    rows = Conversation.objects.filter(conversation_id=conversation_id, user_id=user_id)
    if agent_id is not None:
        rows = rows.filter(agent_id=agent_id)
    return rows.first()


def list_for(*, agent_id: str, user_id: str | None = None):
    """Conversations with an agent instance (one user's, or everyone's), latest first."""
    rows = Conversation.objects.filter(agent_id=agent_id)
    if user_id is not None:
        rows = rows.filter(user_id=user_id)
    return rows.order_by("-updated_at", "-id")


def entries(conversation_id: str, *, limit: int | None = None,
            after: datetime | None = None) -> list[Transcript]:
    """Entries oldest first: keep the last `limit`, then those created at or after `after`."""
    rows = Transcript.objects.filter(conversation_id=conversation_id).order_by("-id")
    if limit:
        rows = rows[:limit]
    items = list(reversed(rows))
    if after is not None:
        items = [item for item in items if item.created_at >= after]
    return items


def touch(conversation_id: str) -> None:
    """The conversation was updated now (a message went through it)."""
    Conversation.objects.filter(conversation_id=conversation_id).update(updated_at=timezone.now())


def delete(conversation_id: str, *, user_id: str) -> bool:
    """Delete the user's conversation with its entries, session state and conversation files.

    Runs stay in the run ledger (history and metrics). Missing or someone else's: False.
    """
    conversation = get(conversation_id, user_id=user_id)
    if conversation is None:
        return False
    with transaction.atomic():
        Transcript.objects.filter(conversation_id=conversation_id).delete()
        AgentRunnerState.objects.filter(scope=StateScope.CONVERSATION,
                                        conversation_id=conversation_id).delete()
        conversation.delete()
    artifacts.delete_conversation(conversation.project_id, user_id, conversation_id)
    return True
