"""Scope keys for runner state: `<scope>:v2:<sha256 of canonical JSON>`.

The hash covers the runner, the binding and the project (the reference host's workspace), plus
the identity of the scope. A scope whose identity is missing has no key and is unavailable.
"""

import functools
import hashlib
import json
from dataclasses import dataclass

SCOPE_KEY_VERSION = 2


def _canonical(parts: dict) -> str:
    return json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@functools.lru_cache(maxsize=4096)  # a conversation's runs ask for the same keys each time
def scope_key(scope: str, *, runner_id: str, binding_identity: str, project_id: str = "",
              conversation_id: str = "", thread_id: str = "", actor_type: str = "",
              actor_id: str = "", subject_type: str = "", subject_id: str = "") -> str | None:
    parts = {
        "version": SCOPE_KEY_VERSION,
        "scope": scope,
        "runner_id": runner_id,
        "binding_identity": binding_identity or "unknown_binding",
        "project_id": project_id or None,
    }
    if scope == "conversation":
        if not conversation_id:
            return None
        parts.update(conversation_id=conversation_id, thread_id=thread_id or None)
    elif scope == "actor":
        if not actor_id:
            return None
        parts.update(actor_type=actor_type or "user", actor_id=actor_id)
    elif scope == "subject":
        if not subject_id:
            return None
        parts.update(subject_type=subject_type or "unknown", subject_id=subject_id)
    elif scope != "runner":
        raise ValueError(f"unknown state scope {scope!r}")
    digest = hashlib.sha256(_canonical(parts).encode()).hexdigest()
    return f"{scope}:v{SCOPE_KEY_VERSION}:{digest}"


# --- conversation state: ADK key prefixes over the ledger's scopes ----------------------------

APP_PREFIX = "app:"
USER_PREFIX = "user:"
TEMP_PREFIX = "temp:"
# (key prefix, ledger scope); the bare prefix last.
PREFIX_SCOPES = ((APP_PREFIX, "runner"), (USER_PREFIX, "actor"), ("", "conversation"))


@dataclass(frozen=True)
class StateIdentity:
    """Which runner state a conversation's state is: the agent's runner and binding."""

    runner_id: str
    binding_identity: str


def conversation_state_fields(conversation, identity: StateIdentity) -> dict:
    """The identity columns of a conversation's state rows."""
    return {
        "runner_id": identity.runner_id, "binding_identity": identity.binding_identity,
        "project_id": conversation.project_id, "conversation_id": conversation.conversation_id,
        "thread_id": "", "actor_type": "user", "actor_id": conversation.user_id,
        "subject_type": "", "subject_id": "",
    }


def conversation_scope_keys(conversation, identity: StateIdentity) -> dict[str, str]:
    """`{ledger scope: scope key}` for the three stored scopes of a conversation."""
    fields = conversation_state_fields(conversation, identity)
    return {
        scope: scope_key(
            scope, runner_id=fields["runner_id"], binding_identity=fields["binding_identity"],
            project_id=fields["project_id"], conversation_id=fields["conversation_id"],
            actor_type=fields["actor_type"], actor_id=fields["actor_id"],
        )
        for _prefix, scope in PREFIX_SCOPES
    }


def split_key(key: str) -> tuple[str, str] | None:
    """`(ledger scope, stored key)` for a prefixed key; None for `temp:` keys."""
    if key.startswith(TEMP_PREFIX):
        return None
    for prefix, scope in PREFIX_SCOPES:
        if prefix and key.startswith(prefix):
            return scope, key[len(prefix):]
    return "conversation", key
