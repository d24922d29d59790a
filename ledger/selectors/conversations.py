"""Reading conversations: a user's sessions with an agent instance, their entries and state.

See `ledger.services.conversations` for what a conversation is and how its state is scoped.
"""

from datetime import datetime

from asgiref.sync import sync_to_async
from django.db.models import Q

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


def by_ledger_id(conversation_id: str, *, agent_id: str | None = None) -> Conversation | None:
    """The conversation of a ledger id, whoever it belongs to (the operator's and the
    engine's view)."""
    rows = Conversation.objects.filter(conversation_id=conversation_id)
    if agent_id is not None:
        rows = rows.filter(agent_id=agent_id)
    return rows.first()


def owner_of(conversation_id: str) -> tuple | None:
    """`(project_id, user_id)` of the conversation as stored, None when there is none."""
    scope = Conversation.objects.filter(conversation_id=conversation_id).values_list(
        "project_id", "user_id").first()
    return tuple(scope) if scope else None


aowner_of = sync_to_async(owner_of)


def of_user(user_id: str):
    """The user's conversations, with any agent."""
    return Conversation.objects.filter(user_id=user_id)


def count_of_agent(agent_id: str) -> int:
    return Conversation.objects.filter(agent_id=agent_id).count()


def entry(conversation_id: str, entry_id: int) -> Transcript | None:
    return Transcript.objects.filter(conversation_id=conversation_id, pk=entry_id).first()


def user_message_before(conversation_id: str, entry_id: int) -> Transcript | None:
    """The last user message before the entry."""
    return Transcript.objects.filter(conversation_id=conversation_id, role="user",
                                     pk__lt=entry_id).order_by("-pk").first()


def entry_before(conversation_id: str, entry_id: int) -> int | None:
    """The id of the entry right before `entry_id`, None when it is the first."""
    return Transcript.objects.filter(conversation_id=conversation_id, pk__lt=entry_id).order_by(
        "-pk").values_list("pk", flat=True).first()


def entries_of_run(run) -> list[Transcript]:
    """The message that started the run and what it answered."""
    if run is None or not run.conversation_id:
        return []
    return list(Transcript.objects.filter(conversation_id=run.conversation_id).filter(
        Q(event_id=run.event_id) | Q(run_id=run.run_id)).order_by("id"))


def attachments_of_message(conversation_id: str, event_id: str) -> list[dict]:
    """The attachment refs of the user message of an event."""
    return (Transcript.objects.filter(conversation_id=conversation_id, event_id=event_id,
                                      role="user")
            .values_list("attachment_refs", flat=True).first()) or []


async def latest_rows(conversation_id: str, limit: int) -> list[dict]:
    """The conversation's last `limit` entries, newest first, as the model's history reads
    them (role, content, content_json, attachment_refs)."""
    return [row async for row in Transcript.objects.filter(conversation_id=conversation_id)
            .order_by("-id").values("role", "content", "content_json",
                                    "attachment_refs")[:limit]]


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
