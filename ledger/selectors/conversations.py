"""Reading conversations: a user's sessions with an agent instance, their entries and state.

See `ledger.services.conversations` for what a conversation is and how its state is scoped.
"""

from datetime import datetime

from ledger.models import AgentRunnerState, Conversation, Transcript
from ledger.state_keys import PREFIX_SCOPES, StateIdentity, conversation_scope_keys


def get(client_id: str, *, user_id: str, agent_id: str | None = None) -> Conversation | None:
    """The user's conversation of that id (with that agent); None when the user has none.

    Someone else's conversation of the same id is never found: ids are scoped to their owner.
    """
    rows = Conversation.objects.filter(client_id=client_id, user_id=user_id)
    if agent_id is not None:
        rows = rows.filter(agent_id=agent_id)
    return rows.order_by("id").first()


def latest_entries(conversation_id: str, limit: int) -> list[tuple]:
    """The conversation's last `limit` transcript entries, oldest first, as
    `(author, role, content_json)`."""
    rows = (Transcript.objects.filter(conversation_id=conversation_id).order_by("-id")
            .values_list("author", "role", "content_json")[:limit])
    return list(reversed(rows))


def owned_by(user_id: str, client_id: str):
    """The user's conversations of that id, with any agent (the WebSocket door names none)."""
    return Conversation.objects.filter(client_id=client_id, user_id=user_id).order_by("id")


def list_for(*, agent_id: str, user_id: str | None = None):
    """Conversations with an agent instance (one user's, or everyone's), latest first."""
    rows = Conversation.objects.filter(agent_id=agent_id)
    if user_id is not None:
        rows = rows.filter(user_id=user_id)
    return rows.order_by("-updated_at", "-id")


def transcript(conversation: Conversation):
    """The conversation's entries, on the index of their conversation."""
    return Transcript.objects.filter(conversation_id=conversation.conversation_id)


def entries(conversation: Conversation, *, limit: int | None = None,
            after: datetime | None = None) -> list[Transcript]:
    """Entries oldest first: keep the last `limit`, then those created at or after `after`."""
    rows = Transcript.objects.filter(conversation_id=conversation.conversation_id).order_by("-id")
    if limit:
        rows = rows[:limit]
    items = list(reversed(rows))
    if after is not None:
        items = [item for item in items if item.created_at >= after]
    return items


def get_state(conversation: Conversation, identity: StateIdentity) -> dict:
    """The merged state: `app:` and `user:` keys with their prefix, session keys bare."""
    keys = conversation_scope_keys(conversation, identity)
    prefixes = {keys[scope]: prefix for prefix, scope in PREFIX_SCOPES}
    rows = AgentRunnerState.objects.filter(scope_key__in=list(prefixes)).order_by("state_key")
    return {prefixes[key] + state_key: value
            for key, state_key, value in rows.values_list("scope_key", "state_key", "value_json")}
