"""Scope keys for runner state: `<scope>:v2:<sha256 of canonical JSON>`.

The hash covers the runner, the binding and the project (the reference host's workspace), plus
the identity of the scope. A scope whose identity is missing has no key and is unavailable.
"""

import hashlib
import json

SCOPE_KEY_VERSION = 2


def _canonical(parts: dict) -> str:
    return json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


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
