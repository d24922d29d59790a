"""Writing conversations: a user's sessions with one agent instance, after ADK's session
service (reads are in `ledger.selectors.conversations`).

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

The runner and binding come from the caller (`ledger.state_keys.StateIdentity`: for an agent instance, its
binding `agent:<instance id>` and its type's runner), since the ledger imports no runner code.
The prefix is stripped when stored and put back when read.
"""

import functools
import operator
import uuid

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, Q, Sum, TextField
from django.db.models.functions import Cast, Length
from django.utils import timezone

from ledger.models import (
    AgentRunEvent,
    AgentRunnerState,
    Conversation,
    StateScope,
    Transcript,
)
from ledger.selectors.conversations import get_state
from ledger.services.artifacts import artifacts
from ledger.services.state import STATE_UPSERT, STATE_VALUE_MAX_BYTES, value_size
from ledger.sql import insert_rows
from ledger.state_keys import (
    StateIdentity,
    conversation_scope_keys,
    conversation_state_fields,
    split_key,
)


class StateLimit(Exception):
    """A state write would pass one of the state's limits (the message names it)."""


# State keys LangHost writes for its own runners; a client writes none of them.
HOST_KEY_PREFIX = "host."


def _checked(delta: dict) -> None:
    """Refuse a delta over the limits it can be judged by alone: keys, bytes per value, bytes
    in all."""
    if len(delta) > settings.LANGHOST_STATE_MAX_KEYS:
        raise StateLimit(f"{len(delta)} keys in one write; the limit is "
                         f"{settings.LANGHOST_STATE_MAX_KEYS} (LANGHOST_STATE_MAX_KEYS).")
    total = 0
    for key, value in delta.items():
        target = split_key(key)
        if target is not None and target[1].startswith(HOST_KEY_PREFIX):
            raise StateLimit(f"{key!r}: keys starting {HOST_KEY_PREFIX!r} are LangHost's own "
                             "(an agent's activated skills, a tool call awaiting approval); "
                             "a client may not write them.")
        size = value_size(value)
        if size > STATE_VALUE_MAX_BYTES:
            raise StateLimit(f"The value of {key!r} is {size} bytes; a value may take "
                             f"{STATE_VALUE_MAX_BYTES}.")
        total += size
    if total > settings.LANGHOST_STATE_MAX_BYTES:
        raise StateLimit(f"The state written is {total} bytes; a conversation's state may take "
                         f"{settings.LANGHOST_STATE_MAX_BYTES} (LANGHOST_STATE_MAX_BYTES).")


def _within_limits(scope_keys: set[str]) -> None:
    """Refuse (rolling the write back) state that, once written, is over its limits: keys per
    scope, bytes of the conversation's scopes together."""
    rows = AgentRunnerState.objects.filter(scope_key__in=scope_keys)
    crowded = rows.values("scope_key").annotate(keys=Count("pk")).filter(
        keys__gt=settings.LANGHOST_STATE_MAX_KEYS).order_by("-keys").first()
    if crowded is not None:
        raise StateLimit(f"A state scope would hold {crowded['keys']} keys; the limit is "
                         f"{settings.LANGHOST_STATE_MAX_KEYS} (LANGHOST_STATE_MAX_KEYS).")
    total = rows.aggregate(bytes=Sum(Length(Cast("value_json", TextField()))))["bytes"] or 0
    if total > settings.LANGHOST_STATE_MAX_BYTES:
        raise StateLimit(f"The conversation's state would take {total} bytes; the limit is "
                         f"{settings.LANGHOST_STATE_MAX_BYTES} (LANGHOST_STATE_MAX_BYTES).")


class ConversationExists(Exception):
    def __init__(self, client_id: str):
        self.client_id = client_id
        super().__init__(f"You already have a conversation '{client_id}' with this agent.")


def update_state(conversation: Conversation, identity: StateIdentity, delta: dict) -> dict:
    """Apply a delta (a `None` value deletes the key; `temp:` keys are dropped) in one short
    transaction, whatever its size; return the merged state. Raises `StateLimit`."""
    delta = delta or {}
    _checked(delta)
    return _write_state(conversation, identity, delta)


def _write_state(conversation: Conversation, identity: StateIdentity, delta: dict) -> dict:
    keys = conversation_scope_keys(conversation, identity)
    fields = conversation_state_fields(conversation, identity)
    written, deleted = [], []
    for key, value in delta.items():
        target = split_key(key)
        if target is None or not target[1]:
            continue
        scope, state_key = target
        if value is None:
            deleted.append(Q(scope_key=keys[scope], state_key=state_key))
        else:
            written.append({"scope": scope, "scope_key": keys[scope], "state_key": state_key,
                            "value_json": value, **fields})
    with transaction.atomic():
        if deleted:
            AgentRunnerState.objects.filter(functools.reduce(operator.or_, deleted)).delete()
        if written:
            insert_rows(AgentRunnerState, written, update_conflicts=STATE_UPSERT)
            _within_limits(set(keys.values()))
    return get_state(conversation, identity)


def create(*, project_id: str, agent_id: str, user_id: str, client_id: str | None = None,
           title: str = "", state: dict | None = None,
           identity: StateIdentity | None = None) -> Conversation:
    """A new conversation of the user with the agent; ConversationExists when the user already
    has one of that id with that agent.

    A generated id serves as both ids; an id the client chose gets a fresh ledger id, so the
    same chosen id can never collide with another user's conversation.
    """
    conversation_id = str(uuid.uuid4())
    client_id = client_id or conversation_id
    try:
        with transaction.atomic():
            conversation = Conversation.objects.create(
                conversation_id=conversation_id, client_id=client_id, project_id=project_id,
                agent_id=agent_id, user_id=user_id, title=title or "",
            )
            if state and identity is not None:
                update_state(conversation, identity, state)
    except IntegrityError:
        if Conversation.objects.filter(agent_id=agent_id, user_id=user_id,
                                       client_id=client_id).exists():
            raise ConversationExists(client_id) from None
        raise
    return conversation


# What a copied entry keeps of its original (the rest is its new conversation's).
_ENTRY_FIELDS = ("thread_id", "project_id", "event_id", "run_id", "runner_id", "role", "author",
                 "item_type", "content", "content_json", "attachment_refs", "created_at")


def fork(conversation: Conversation, last_entry_id: int | None, identity: StateIdentity,
         title: str = "") -> Conversation:
    """A new conversation of the same user with the same agent that starts as this one was
    at entry `last_entry_id` (None: before its first): its entries up to that one, copied
    (each naming the entry it was copied from), and the session state the runs answered by
    then had written, their `state.updated` events replayed in order. Session state a client
    wrote (`update_state`) is not versioned: it is not carried over.
    """
    entries = list(Transcript.objects.filter(
        conversation_id=conversation.conversation_id,
        id__lte=last_entry_id if last_entry_id is not None else 0).order_by("id").values(
        "id", "metadata_json", *_ENTRY_FIELDS))
    with transaction.atomic():
        forked = create(project_id=conversation.project_id, agent_id=conversation.agent_id,
                        user_id=conversation.user_id, title=title)
        forked.forked_from, forked.forked_at_entry = conversation.conversation_id, last_entry_id
        forked.save(update_fields=["forked_from", "forked_at_entry"])
        if entries:
            insert_rows(Transcript, [{
                **{field: entry[field] for field in _ENTRY_FIELDS},
                "conversation_id": forked.conversation_id,
                "metadata_json": {**(entry["metadata_json"] or {}), "forked_from": {
                    "conversation_id": conversation.conversation_id, "entry_id": entry["id"]}},
            } for entry in entries])
        state = _state_written_by({entry["run_id"] for entry in entries
                                   if entry["run_id"] and entry["role"] != "user"})
        if state:  # LangHost's own keys too (`host.`): the state as the runs left it
            _write_state(forked, identity, state)
    return forked


def _state_written_by(run_ids: set[str]) -> dict:
    """The session (conversation-scope) state these runs wrote, as a delta: the last value
    each key was given, None for a key deleted."""
    state = {}
    for data in AgentRunEvent.objects.filter(run_id__in=run_ids, type="state.updated").order_by(
            "id").values_list("data_json", flat=True):
        key = data.get("key") if isinstance(data, dict) else None
        # A key that reads as another scope's (`user:`, `app:`, `temp:`) cannot be carried.
        if (data.get("scope") == StateScope.CONVERSATION and isinstance(key, str) and key
                and split_key(key) == (StateScope.CONVERSATION, key)):
            state[key] = data.get("value")
    return state


def touch(conversation_id: str) -> None:
    """The conversation was updated now (a message went through it)."""
    Conversation.objects.filter(conversation_id=conversation_id).update(updated_at=timezone.now())


def delete(conversation: Conversation) -> None:
    """Delete a conversation with its entries, session state and conversation files.

    Runs stay in the run ledger (history and metrics).
    """
    with transaction.atomic():
        Transcript.objects.filter(conversation_id=conversation.conversation_id).delete()
        AgentRunnerState.objects.filter(scope=StateScope.CONVERSATION,
                                        conversation_id=conversation.conversation_id).delete()
        conversation.delete()
    artifacts.delete_conversation(conversation.project_id, conversation.user_id,
                                  conversation.conversation_id)


@sync_to_async
def withhold_message(event_id: str, notice: str) -> None:
    """The user's message of that event, stood in for by `notice` in the conversation's
    transcript (a guardrail tripped on it: no later turn reads it)."""
    Transcript.objects.filter(event_id=event_id, role="user").update(
        content=notice, content_json={"role": "user", "content": notice}, attachment_refs=[])
