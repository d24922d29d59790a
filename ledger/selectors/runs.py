"""Read side of the ledger in the shapes the API, the admin and live views use."""

import asyncio

from asgiref.sync import sync_to_async
from django.db.models import Count

from ledger import sql, wire
from ledger.models import (
    TERMINAL_STATUSES,
    AgentRun,
    AgentRunEvent,
    EventLog,
    RunStatus,
    Transcript,
)

FOLLOW_POLL_SECONDS = 0.1
OUTCOME_FIELDS = ("run_id", "event_id", "agent_id", "binding_id", "runner_id",
                  "conversation_id", "thread_id", "project_id", "status", "status_reason",
                  "usage_json", "cost_json", "created_at", "started_at", "finished_at",
                  "deadline_at", "cancel_requested_at")


def epoch(value) -> int | None:
    return int(value.timestamp()) if value else None


def outcome_dict(row: dict) -> dict:
    """A run's outcome from its `OUTCOME_FIELDS`."""
    return wire.run_outcome(row)


def event_dict(event: AgentRunEvent) -> dict:
    return wire.run_event(run_id=event.run_id, sequence=event.sequence, type_=event.type,
                          data=event.data_json, usage=event.usage_json, source=event.source,
                          created_at=event.created_at)


# Read on every run's end: lean SQL (ledger.sql), not a compiled queryset.
def run_outcome_sync(run_id: str) -> dict:
    row = sql.first_row(AgentRun, OUTCOME_FIELDS, "run_id = %s", [run_id])
    return outcome_dict(row) if row else {"run_id": run_id, "status": None}


run_outcome = sync_to_async(run_outcome_sync)


@sync_to_async
def active_runs_of_conversation(*, runner_id: str, binding_id: str, conversation_id: str,
                                thread_id: str, actor_type: str, actor_id: str) -> list[str]:
    """The running runs of this runner and binding in this conversation and thread, for this
    actor, oldest first: whichever process executes them."""
    return list(AgentRun.objects.filter(
        conversation_id=conversation_id, status=RunStatus.RUNNING, runner_id=runner_id,
        binding_id=binding_id, thread_id=thread_id, actor_type=actor_type, actor_id=actor_id,
    ).order_by("id").values_list("run_id", flat=True))


def status_of(run_id: str) -> str | None:
    """The run's status, or None while it has no row (not started, or never)."""
    return AgentRun.objects.filter(run_id=run_id).values_list("status", flat=True).first()


run_status = sync_to_async(status_of)


@sync_to_async
def steps_of(run_id: str) -> list[str]:
    """The ids of the runs that are steps of the run (a workflow's, its agent tools' calls),
    in the order they started."""
    return list(AgentRun.objects.filter(parent_run_id=run_id).order_by(
        "created_at", "id").values_list("run_id", flat=True))


@sync_to_async
def ancestors(run_id: str, limit: int) -> int:
    """How many runs the run is a step of, one inside another (counted up to `limit`)."""
    depth, parent = 0, AgentRun.objects.filter(run_id=run_id).values_list(
        "parent_run_id", flat=True).first()
    while parent and depth < limit:
        depth += 1
        parent = AgentRun.objects.filter(run_id=parent).values_list(
            "parent_run_id", flat=True).first()
    return depth


def get(run_id: str, *fields: str) -> AgentRun | None:
    """The run of that id (only `fields` loaded, when named), None when there is none."""
    rows = AgentRun.objects.filter(run_id=run_id)
    return (rows.only(*fields) if fields else rows).first()


aget = sync_to_async(get)


def all_runs():
    """Every run, newest first."""
    return AgentRun.objects.order_by("-id")


def started_by(actor_id: str):
    """The runs a user started (each one's own index)."""
    return AgentRun.objects.filter(actor_type="user", actor_id=actor_id)


def of_project(project_id: str):
    return AgentRun.objects.filter(project_id=project_id)


def of_agent(agent_id: str):
    return AgentRun.objects.filter(agent_id=agent_id)


def agent_is_busy(agent_id: str) -> bool:
    """Whether a run of the agent is queued or running."""
    return AgentRun.objects.active().filter(agent_id=agent_id).exists()


def started_by_event_prefix(prefix: str, limit: int) -> list[dict]:
    """The newest runs whose event id starts with `prefix` (a schedule's ticks)."""
    # A range, not LIKE: SQLite's LIKE ignores case and cannot use the index.
    return list(AgentRun.objects.filter(event_id__gte=prefix, event_id__lt=prefix + "\uffff")
                .order_by("-id").values("run_id", "status", "created_at")[:limit])


def events_after(run_id: str, after: int):
    """The run's events past `after`, on the run's own index."""
    return AgentRunEvent.objects.filter(run_id=run_id, sequence__gt=after)


def event_record(event_id: str) -> EventLog | None:
    return EventLog.objects.filter(event_id=event_id).first()


def tool_calls_of(run_id: str) -> list[tuple[str, dict]]:
    """The tools the run called, in order: each `(name, arguments)`."""
    return [(data.get("tool_name") or "", data.get("parameters") or {})
            for data in AgentRunEvent.objects.filter(run_id=run_id, type="tool.call.started")
            .order_by("sequence").values_list("data_json", flat=True)]


def active_counts() -> dict[str, int]:
    """Runs queued or running now, by status (on the index of active runs)."""
    return dict(AgentRun.objects.active().values("status").annotate(n=Count("id"))
                .order_by().values_list("status", "n"))


@sync_to_async
def cancel_requests(run_ids: list[str]) -> dict[str, str]:
    """Of `run_ids`, the runs flagged for cancellation, with the reason the flag set."""
    return dict(AgentRun.objects.filter(run_id__in=run_ids, cancel_requested_at__isnull=False)
                .values_list("run_id", "status_reason"))


@sync_to_async
def run_outcome_for_event(idempotency_key: str) -> dict:
    """The outcome of the run of the event with this key (its event log row names the run)."""
    logged = EventLog.objects.filter(idempotency_key=idempotency_key).values_list(
        "event_id", "run_id").first()
    row = logged and logged[1] and sql.first_row(AgentRun, OUTCOME_FIELDS, "run_id = %s",
                                                 [logged[1]])
    return outcome_dict(row) if row else {"run_id": None, "status": None,
                                          "event_id": logged[0] if logged else idempotency_key}


@sync_to_async
def _events_after(run_id: str, after: int) -> tuple[list[dict], bool]:
    events = [event_dict(e) for e in AgentRunEvent.objects.filter(run_id=run_id, sequence__gt=after)
              .order_by("sequence")]
    status = AgentRun.objects.filter(run_id=run_id).values_list("status", flat=True).first()
    return events, status is None or status in TERMINAL_STATUSES


async def run_events(run_id: str, *, after: int = 0, wait_terminal: bool = False) -> list[dict]:
    """Events after a sequence; with `wait_terminal`, follow the run until it has ended."""
    collected = []
    while True:
        events, ended = await _events_after(run_id, after)
        collected.extend(events)
        if events:
            after = events[-1]["sequence"]
        if ended or not wait_terminal:
            return collected
        await asyncio.sleep(FOLLOW_POLL_SECONDS)


# --- shapes the SDK's host-response DTOs accept (timestamps as integer epoch seconds) ------

def sdk_run(run: AgentRun) -> dict:
    return {
        "id": run.pk, "run_id": run.run_id, "event_id": run.event_id,
        "agent_id": run.agent_id or None, "binding_id": run.binding_id,
        "runner_id": run.runner_id, "conversation_id": run.conversation_id or None,
        "thread_id": run.thread_id or None, "workspace_id": run.project_id or None,
        "status": run.status, "status_reason": run.status_reason or None,
        "created_at": epoch(run.created_at), "started_at": epoch(run.started_at),
        "finished_at": epoch(run.finished_at), "updated_at": epoch(run.updated_at),
        "deadline_at": epoch(run.deadline_at), "cancel_requested_at": epoch(run.cancel_requested_at),
        "usage": run.usage_json, "cost": run.cost_json, "metadata": {},
    }


def sdk_run_event(event: AgentRunEvent) -> dict:
    return {
        "id": event.pk, "run_id": event.run_id, "sequence": event.sequence, "type": event.type,
        "data": event.data_json, "usage": event.usage_json, "created_at": epoch(event.created_at),
        "source": event.source, "metadata": event.metadata_json,
    }


def sdk_transcript(item: Transcript, include_attachments: bool = False) -> dict:
    return {
        "transcript_id": str(item.pk), "event_id": item.event_id or "",
        "conversation_id": item.conversation_id, "workspace_id": item.project_id or None,
        "thread_id": item.thread_id or None, "role": item.role, "item_type": item.item_type,
        "content": item.content, "content_json": item.content_json, "seq": item.pk,
        "cursor": str(item.pk), "created_at": epoch(item.created_at),
        "metadata": {**item.metadata_json, "author": item.author, "run_id": item.run_id or None},
        "attachment_refs": item.attachment_refs if include_attachments else [],
    }


def sdk_event_record(entry: EventLog) -> dict:
    return {
        "event_id": entry.event_id, "event_type": entry.event_type,
        "event_time": epoch(entry.created_at), "source": entry.source or "api",
        "workspace_id": entry.project_id or None, "conversation_id": entry.conversation_id or None,
        "thread_id": entry.thread_id or None, "actor_type": entry.actor_type or None,
        "actor_id": entry.actor_id or None, "subject_type": entry.subject_type or None,
        "subject_id": entry.subject_id or None, "input_summary": entry.input_summary,
        "seq": entry.pk, "cursor": str(entry.pk), "created_at": epoch(entry.created_at),
        "metadata": entry.metadata_json,
    }


def _page(items: list, limit: int, cursor_of) -> dict:
    has_more = len(items) > limit
    items = items[:limit]
    return {"items": items, "has_more": has_more,
            "next_cursor": cursor_of(items[-1]) if has_more and items else None,
            "prev_cursor": cursor_of(items[0]) if items else None}


def clamp_limit(limit, default: int = 50) -> int:
    try:
        return max(1, min(int(limit or default), 100))
    except (TypeError, ValueError):
        return default


def _int_cursor(cursor) -> int | None:
    try:
        return int(cursor) if cursor not in (None, "") else None
    except (TypeError, ValueError):
        return None


def _cursor_window(rows, column: str, *, before_cursor, after_cursor, direction: str,
                   limit: int):
    """Rows strictly between the cursors on `column`, in `direction`, one more than `limit`
    (so `_page` can tell whether there are more)."""
    if (before := _int_cursor(before_cursor)) is not None:
        rows = rows.filter(**{f"{column}__lt": before})
    if (after := _int_cursor(after_cursor)) is not None:
        rows = rows.filter(**{f"{column}__gt": after})
    return rows.order_by(f"-{column}" if direction == "backward" else column)[: limit + 1]


def history_page_sync(conversation_id: str, thread_id: str, *, before_cursor=None,
                      after_cursor=None, limit=50, direction="backward",
                      include_attachments=False) -> dict:
    limit = clamp_limit(limit)
    rows = Transcript.objects.filter(conversation_id=conversation_id, thread_id=thread_id)
    total = rows.count()
    rows = _cursor_window(rows, "pk", before_cursor=before_cursor, after_cursor=after_cursor,
                          direction=direction, limit=limit)
    items = [sdk_transcript(item, include_attachments) for item in rows]
    return {**_page(items, limit, lambda item: item["cursor"]), "total_count": total}


def history_search_sync(conversation_id: str, thread_id: str, query: str, top_k=10) -> dict:
    top_k = clamp_limit(top_k, default=10)
    rows = Transcript.objects.filter(conversation_id=conversation_id, thread_id=thread_id,
                                     content__icontains=query or "").order_by("-pk")
    return {"items": [sdk_transcript(item) for item in rows[:top_k]], "total_count": rows.count(),
            "query": query or ""}


def event_page_sync(conversation_id: str, thread_id: str, *, event_types=None,
                    before_cursor=None, limit=50) -> dict:
    limit = clamp_limit(limit)
    rows = EventLog.objects.filter(conversation_id=conversation_id, thread_id=thread_id)
    if event_types:
        rows = rows.filter(event_type__in=list(event_types))
    total = rows.count()
    rows = _cursor_window(rows, "pk", before_cursor=before_cursor, after_cursor=None,
                          direction="backward", limit=limit)
    items = [sdk_event_record(e) for e in rows]
    return {**_page(items, limit, lambda item: item["cursor"]), "total_count": total}


def run_list_sync(*, runner_id: str, conversation_id: str, thread_id: str, statuses=None,
                  before_cursor=None, limit=50) -> dict:
    limit = clamp_limit(limit)
    rows = AgentRun.objects.filter(runner_id=runner_id, conversation_id=conversation_id,
                                   thread_id=thread_id)
    if statuses:
        rows = rows.filter(status__in=list(statuses))
    total = rows.count()
    rows = _cursor_window(rows, "pk", before_cursor=before_cursor, after_cursor=None,
                          direction="backward", limit=limit)
    items = [sdk_run(run) for run in rows]
    return {**_page(items, limit, lambda item: str(item["id"])), "total_count": total}


def run_events_page_sync(run_id: str, *, before_cursor=None, after_cursor=None, limit=50,
                         direction="forward") -> dict:
    limit = clamp_limit(limit)
    rows = AgentRunEvent.objects.filter(run_id=run_id)
    total = rows.count()
    rows = _cursor_window(rows, "sequence", before_cursor=before_cursor,
                          after_cursor=after_cursor, direction=direction, limit=limit)
    items = [sdk_run_event(event) for event in rows]
    return {**_page(items, limit, lambda item: str(item["sequence"])), "total_count": total}
