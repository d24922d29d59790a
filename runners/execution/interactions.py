"""A run asks a person: LangBot's `interaction.requested` action.

A request is checked against the run's grant (a runner that declares the `interactions`
capability, or the `interactions: [request]` permission, in a conversation), stored with a
one-time token (only its hash kept) and an expiry, and delivered to the run's caller as an
`interaction.requested` frame that carries the token. The stored run event is the runner's
own `action.requested`, without the token. Answering it is the door's
(`runners.conversations.interactions`).
"""

import hashlib
import secrets
from datetime import UTC, datetime, timedelta

import pydantic
from django.conf import settings
from django.utils import timezone
from langbot_plugin.api.entities.builtin.runner.interaction import (
    INTERACTION_REQUESTED_ACTION,
    InteractionRequest,
)

from ledger.services import interactions as ledger
from runners.execution.run import RunState

FRAME_TYPE = "interaction.requested"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def is_interaction(data: dict) -> bool:
    return data.get("action") == INTERACTION_REQUESTED_ACTION


def may_ask(state: RunState) -> bool:
    descriptor = state.descriptor
    return bool(state.event.conversation_id) and (
        bool((descriptor.capabilities or {}).get("interactions"))
        or "request" in ((descriptor.permissions or {}).get("interactions") or []))


async def requested(state: RunState, payload: dict) -> dict | None:
    """Store the run's request; the frame for its caller, or None when it was refused (a host
    event says why)."""
    if not may_ask(state):
        state.host_event("interaction.refused", {
            "reason": "the runner may not ask: it declares no `interactions` capability or "
                      "permission, or the run has no conversation to answer in"})
        return None
    try:
        request = InteractionRequest.model_validate(payload)
    except pydantic.ValidationError as exc:
        state.host_event("interaction.refused", {"reason": f"invalid request: {exc}"})
        return None
    now = timezone.now()
    latest = now + timedelta(seconds=settings.LANGHOST_INTERACTION_MAX_SECONDS)
    try:
        expires_at = (datetime.fromtimestamp(request.expires_at, UTC) if request.expires_at
                      else now + timedelta(seconds=settings.LANGHOST_INTERACTION_TTL_SECONDS))
    except (OverflowError, OSError, ValueError):  # past any date: as late as may be, or gone
        expires_at = latest if request.expires_at > 0 else now
    if expires_at <= now:
        state.host_event("interaction.refused", {"reason": "it expired before it was asked"})
        return None
    expires_at = min(expires_at, latest)
    token = secrets.token_urlsafe(32)
    await ledger.create(
        run_id=state.run_id, interaction_id=request.interaction_id,
        conversation_id=state.event.conversation_id, project_id=state.event.project_id or "",
        agent_id=state.event.agent_id or "", runner_id=state.descriptor.id,
        agent_name=state.agent_name, kind=request.kind, title=request.title,
        request_json=request.model_dump(mode="json"), token_hash=token_hash(token),
        expires_at=expires_at)
    return {**request.model_dump(mode="json"), "expires_at": int(expires_at.timestamp()),
            "token": token}
