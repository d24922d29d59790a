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

import uuid

from django.db import IntegrityError, transaction
from django.utils import timezone

from ledger.models import AgentRunnerState, Conversation, StateScope, Transcript
from ledger.selectors.conversations import get_state
from ledger.services.artifacts import artifacts
from ledger.services.runs import StateWrite, _upsert_state
from ledger.state_keys import (
    StateIdentity,
    conversation_scope_keys,
    conversation_state_fields,
    split_key,
)


class ConversationExists(Exception):
    def __init__(self, client_id: str):
        self.client_id = client_id
        super().__init__(f"You already have a conversation '{client_id}' with this agent.")


def update_state(conversation: Conversation, identity: StateIdentity, delta: dict) -> dict:
    """Apply a delta (a `None` value deletes the key; `temp:` keys are dropped); return the
    merged state."""
    keys = conversation_scope_keys(conversation, identity)
    fields = conversation_state_fields(conversation, identity)
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
