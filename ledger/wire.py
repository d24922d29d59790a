"""What LangHost says about runs on the wire, one definition per shape, in the spirit of
Zulip's event schema: the run event, the message delivered to a run's caller, the `run.status`
frame, a run's outcome, and the NDJSON frames of a streamed run. Every emitter (REST, NDJSON,
both WebSockets, the admin run page's feed) builds its frames here, and the tests check each
against these schemas (`tests/test_wire_shapes.py`).

The builders are plain functions (they run for every event of every run); the pydantic models
are the definitions, used to check frames and to document them.
"""

import json
from datetime import datetime
from typing import Literal

import pydantic

Source = Literal["runner", "host"]


class Shape(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", strict=True)


class RunEvent(Shape):
    """One event of a run, as the ledger keeps it."""

    run_id: str
    sequence: int
    type: str
    data: dict
    usage: dict | None
    source: Source
    created_at: str


class RunMessage(Shape):
    """A message delivered to the run's caller (deltas, completed messages)."""

    run_id: str
    sequence: int
    type: str
    data: dict
    usage: dict | None


class RunStatusFrame(Shape):
    """The last frame of a run's live stream: how it ended, after its last event."""

    type: Literal["run.status"]
    run_id: str
    status: str
    status_reason: str
    sequence: int


class RunOutcome(Shape):
    """How a run ended, as the ledger records it."""

    run_id: str
    event_id: str
    agent_id: str | None
    binding_id: str
    runner_id: str
    conversation_id: str | None
    thread_id: str | None
    project_id: str | None
    status: str
    status_reason: str
    usage: dict | None
    cost: dict | None
    created_at: str | None
    started_at: str | None
    finished_at: str | None
    deadline_at: str | None
    cancel_requested_at: str | None
    duration_seconds: float | None


def iso(moment: datetime | None) -> str | None:
    """A timestamp as every frame writes it: ISO 8601, UTC as `Z` (as DRF writes it)."""
    if moment is None:
        return None
    text = moment.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def run_event(*, run_id: str, sequence: int, type_: str, data: dict, usage: dict | None,
              source: str, created_at: datetime) -> dict:
    return {"run_id": run_id, "sequence": sequence, "type": type_, "data": data,
            "usage": usage, "source": source, "created_at": iso(created_at)}


def run_message(*, run_id: str, sequence: int, type_: str, data: dict,
                usage: dict | None) -> dict:
    return {"run_id": run_id, "sequence": sequence, "type": type_, "data": data,
            "usage": usage}


def run_status(*, run_id: str, status: str, status_reason: str | None, sequence: int) -> dict:
    return {"type": "run.status", "run_id": run_id, "status": status,
            "status_reason": status_reason or "", "sequence": sequence}


def run_outcome(row: dict) -> dict:
    """A run's outcome from its row's columns (`usage_json`, `cost_json`, timestamps)."""
    started, finished = row["started_at"], row["finished_at"]
    return {
        "run_id": row["run_id"], "event_id": row["event_id"],
        "agent_id": row["agent_id"] or None, "binding_id": row["binding_id"],
        "runner_id": row["runner_id"], "conversation_id": row["conversation_id"] or None,
        "thread_id": row["thread_id"] or None, "project_id": row["project_id"] or None,
        "status": row["status"], "status_reason": row["status_reason"],
        "usage": row["usage_json"], "cost": row["cost_json"],
        "created_at": iso(row["created_at"]), "started_at": iso(started),
        "finished_at": iso(finished), "deadline_at": iso(row["deadline_at"]),
        "cancel_requested_at": iso(row["cancel_requested_at"]),
        "duration_seconds": (finished - started).total_seconds() if started and finished
        else None,
    }


def steered_outcome(*, claimed_run_id: str, event_id: str,
                    conversation_id: str | None) -> dict:
    """The outcome of a message absorbed into an active run (steering): no run of its own,
    the run that took it."""
    return {"run_id": claimed_run_id, "event_id": event_id, "status": "steered",
            "status_reason": f"absorbed into active run {claimed_run_id}", "usage": None,
            "conversation_id": conversation_id}


def dumps(frame: dict) -> str:
    """One frame as JSON text (a WebSocket message, a response body)."""
    return json.dumps(frame, default=str)


def ndjson(frame: dict) -> str:
    """One frame as a line of an NDJSON stream."""
    return dumps(frame) + "\n"
