"""Runner state: what runs keep per conversation, actor, subject or runner (`AgentRunnerState`),
read as a snapshot when a run starts and through the in-run state APIs, written with a run's
results or by a state API call."""

import json
from dataclasses import dataclass, replace

from asgiref.sync import sync_to_async
from django.db import connection, transaction

from ledger.models import AgentRunnerState
from ledger.sql import insert_rows

STATE_VALUE_MAX_BYTES = 256 * 1024
STATE_VALUE_LIMIT = f"{STATE_VALUE_MAX_BYTES // 1024} KiB"
# A state row collides on its scope and key: the write updates its value.
STATE_UPSERT = (("scope_key", "state_key"), ("value_json", "updated_at"))


@dataclass
class StateWrite:
    scope: str
    scope_key: str
    state_key: str
    value: object
    identity: dict


def value_size(value) -> int:
    """The bytes a state value takes as stored (its JSON); TypeError or ValueError when it is
    not JSON."""
    return len(json.dumps(value).encode())


def upsert(write: StateWrite) -> None:
    insert_rows(AgentRunnerState, [{
        "scope": write.scope, "scope_key": write.scope_key, "state_key": write.state_key,
        "value_json": write.value, **write.identity,
    }], update_conflicts=STATE_UPSERT)


def snapshot(scope_keys: dict[str, str]) -> dict[str, dict]:
    """`{scope: {state_key: value}}` for each scope that has a key."""
    snapshot = {scope: {} for scope in ("conversation", "actor", "subject", "runner")}
    by_key = {key: scope for scope, key in scope_keys.items()}
    if by_key:
        value_field = AgentRunnerState._meta.get_field("value_json")
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT scope_key, state_key, value_json FROM agent_runner_state "
                f"WHERE scope_key IN ({', '.join(['%s'] * len(by_key))})", list(by_key))
            for key, state_key, value in cursor.fetchall():
                snapshot[by_key[key]][state_key] = value_field.from_db_value(value, None,
                                                                             connection)
    return snapshot


@sync_to_async
def state_get(scope_key: str, state_key: str):
    row = AgentRunnerState.objects.filter(scope_key=scope_key, state_key=state_key).first()
    return None if row is None else row.value_json


state_set = sync_to_async(upsert)


@sync_to_async
def state_add_to_list(write: StateWrite) -> list:
    """Add `write.value`'s items to the list stored under its key, each once, in one
    transaction: writers at the same time each keep theirs. The list now stored."""
    with transaction.atomic():
        row = AgentRunnerState.objects.select_for_update().filter(
            scope_key=write.scope_key, state_key=write.state_key).first()
        stored = row.value_json if row is not None and isinstance(row.value_json, list) else []
        merged = stored + [item for item in write.value if item not in stored]
        upsert(replace(write, value=merged))
    return merged


@sync_to_async
def state_delete(scope_key: str, state_key: str) -> bool:
    deleted, _ = AgentRunnerState.objects.filter(scope_key=scope_key, state_key=state_key).delete()
    return bool(deleted)


@sync_to_async
def state_list(scope_key: str, prefix: str = "", limit: int = 100) -> tuple[list[str], bool]:
    limit = max(1, min(int(limit or 100), 100))
    rows = AgentRunnerState.objects.filter(scope_key=scope_key)
    if prefix:
        rows = rows.filter(state_key__startswith=prefix)
    keys = list(rows.order_by("state_key").values_list("state_key", flat=True)[: limit + 1])
    return keys[:limit], len(keys) > limit
