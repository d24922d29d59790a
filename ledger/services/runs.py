"""Write side of the ledger, as async services.

Each service is one database round trip from the event loop's point of view: the database
work of one step (start a run, record a batch of results, finish a run) runs in one
transaction on Django's sync thread, so the run loop pays one thread hop per step. The run
loop's own statements are built by `ledger.sql`.
"""

import hashlib
import json
from dataclasses import dataclass, replace
from datetime import datetime

from asgiref.sync import sync_to_async
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.db.models.signals import post_migrate
from django.dispatch import receiver
from django.utils import timezone

from ledger import owners, signals
from ledger.models import (
    TERMINAL_STATUSES,
    TRANSCRIPT_MAX_CHARS,
    AgentRun,
    AgentRunEvent,
    EventLog,
    EventSource,
    ModelCall,
    RunGrants,
    RunStatus,
    Transcript,
    message_text,
)
from ledger.selectors.model_calls import run_usage
from ledger.selectors.runs import OUTCOME_FIELDS, outcome_dict, run_outcome_sync
from ledger.services import rollups
from ledger.services import state as runner_state
from ledger.services.leases import drop_queued_steering, lease_end
from ledger.sql import first_row, insert_rows, update_returning


class DuplicateEvent(Exception):
    """The event id was journaled before; `run_id` is the run it started, if any."""

    def __init__(self, event_id: str, run_id: str | None):
        self.event_id = event_id
        self.run_id = run_id
        super().__init__(f"event {event_id} was already received")


@dataclass
class StartedRun:
    """What a run starts from: the state snapshot of its scopes (`{scope: {key: value}}`),
    and the cursor of its conversation's last transcript entry before its own message (None
    when not asked for, or when the conversation has none)."""

    state: dict[str, dict]
    latest_cursor: str | None = None
    # The run waits its turn in its conversation (see `promote_queued`).
    queued: bool = False
    # The run's rows, not written yet: they go with its first results (`record_results`).
    start: "PendingStart | None" = None


@dataclass
class PendingStart:
    """A run's start kept back by `start_run(defer=True)`: the rows it writes."""

    run: dict
    event_log: dict
    user_transcript: dict | None
    owner_id: str
    grants: dict | None
    started_at: datetime


@sync_to_async
def start_run(*, run: dict, event_log: dict, user_transcript: dict | None, owner_id: str,
              scope_keys: dict[str, str],
              history_of: tuple[str, str] | None = None, turn: str | None = None,
              queued_event: dict | None = None, grants: dict | None = None,
              defer: bool = False) -> StartedRun:
    """Create the `running` row, the event log row and the user's transcript entry together;
    the state snapshot of `scope_keys`, and (given `history_of`, a conversation and thread)
    the latest history cursor before the new entry.

    With a `turn` (`reject` or `enqueue`, see "A conversation's turns" below), a run of a
    conversation that has an active run is refused (`ConversationBusy`) or `queued`
    (`StartedRun.queued`: nothing else is read or written until `promote_queued`); a queued
    row keeps `queued_event` in its metadata, for whoever starts it.

    `grants`, the part of the run's authorization its binding decides, is kept once per
    distinct value (`RunGrants`), the run row naming it by digest.

    The event log's unique idempotency key makes a replayed event fail here, before anything
    runs.

    `defer` (no `turn`): nothing is written; the rows come back as `StartedRun.start`, for
    `record_results` to write with the run's first results, one transaction for a short run.
    Only for a run nobody can ask for meanwhile: its id not yet given out, its event's id the
    host's own (checked here all the same).
    """
    now = timezone.now()
    latest = None
    if grants is not None:
        run = {**run, "grants_digest": grants_digest(grants)}
    if defer:
        duplicate = _duplicate(event_log)
        if duplicate is not None:
            raise duplicate
        latest = _latest_entry(history_of) if history_of is not None else None
        return StartedRun(runner_state.snapshot(scope_keys), str(latest) if latest else None,
                          start=PendingStart(run, event_log, user_transcript, owner_id,
                                             grants, now))
    try:
        with transaction.atomic():
            if turn and run["conversation_id"]:
                if EventLog.objects.filter(
                        idempotency_key=event_log["idempotency_key"]).exists():
                    raise IntegrityError  # a replay: answered below, busy or not
                _lock_conversation(run["conversation_id"])
                active = _active_runs(run["conversation_id"]).values_list(
                    "run_id", flat=True).first()
                if active is not None:
                    if turn == REJECT:
                        raise ConversationBusy(active)
                    insert_rows(EventLog, [{"run_id": run["run_id"], **event_log}])
                    insert_rows(AgentRun, [{
                        "status": RunStatus.QUEUED, "execution_owner_id": owner_id,
                        "lease_expires_at": lease_end(now), **run, "metadata_json": {
                            **run["metadata_json"], "queued_event": queued_event}}])
                    return StartedRun({}, queued=True)
            if history_of is not None:
                latest = _latest_entry(history_of)
            _write_start(PendingStart(run, event_log, user_transcript, owner_id, grants, now))
    except IntegrityError:
        duplicate = _duplicate(event_log)
        if duplicate is None:
            raise
        raise duplicate from None
    _remember_grants(run)
    return StartedRun(runner_state.snapshot(scope_keys), str(latest) if latest else None)


def _write_start(start: PendingStart, finish: tuple | None = None) -> dict | None:
    """The `running` row, its event log row and the user's transcript entry (in a
    transaction); its grants row unless this process wrote it before.

    With the run's `finish` (as `ResultWrite.finish`), the row is written ended, and the
    run's outcome returned."""
    run = start.run
    if start.grants is not None and run["grants_digest"] not in _grants_stored:
        RunGrants.objects.bulk_create([RunGrants(digest=run["grants_digest"],
                                                 snapshot=start.grants)], ignore_conflicts=True)
    insert_rows(EventLog, [{"run_id": run["run_id"], **start.event_log}])
    row = {"status": RunStatus.RUNNING, "created_at": start.started_at,
           "started_at": start.started_at,
           "execution_owner_id": start.owner_id, "lease_expires_at": lease_end(start.started_at),
           **run}
    if finish is not None:
        status, reason, usage, _may_have_steering, may_have_model_calls = finish
        row.update(_ended_fields(run["run_id"], status, reason, usage, may_have_model_calls))
    insert_rows(AgentRun, [row])
    if start.user_transcript:
        insert_rows(Transcript, [start.user_transcript])
    _started(run)
    if finish is None:
        return None
    ended = {name: row.get(name, AgentRun._meta.get_field(name).get_default())
             for name in OUTCOME_FIELDS}
    rollups.run_ended(ended)
    return outcome_dict(ended)


def _started(run: dict) -> None:
    signals.send_on_commit(signals.run_started, run={
        name: run.get(name, "") for name in ("run_id", "runner_id", "agent_id")})


def _remember_grants(run: dict) -> None:
    """After the commit that wrote a run's grants row (not inside a transaction that may
    still roll back)."""
    if run.get("grants_digest") and not connection.in_atomic_block:
        _grants_stored.add(run["grants_digest"])


def _duplicate(event_log: dict) -> DuplicateEvent | None:
    """The event's earlier arrival, if its idempotency key was journaled before."""
    existing = first_row(EventLog, ("event_id", "run_id"), "idempotency_key = %s",
                         [event_log["idempotency_key"]])
    return None if existing is None else DuplicateEvent(existing["event_id"],
                                                        existing["run_id"] or None)


# The grants this process stored (or found stored): their rows are not written again. A
# flush (tests) or a migration empties the table, and this with it.
_grants_stored: set[str] = set()


@receiver(post_migrate)
def _forget_stored_grants(**kwargs) -> None:
    _grants_stored.clear()


def grants_digest(grants: dict) -> str:
    return hashlib.sha256(json.dumps(grants, sort_keys=True, separators=(",", ":"),
                                     default=str).encode()).hexdigest()


def _latest_entry(history_of: tuple[str, str]):
    return Transcript.objects.filter(conversation_id=history_of[0], thread_id=history_of[1]
                                     ).order_by("-pk").values_list("pk", flat=True).first()


# --- A conversation's turns -------------------------------------------------------------------
#
# With a multitask strategy, a conversation has one active run at a time. A run that arrives
# while another is active is refused (`reject`) or waits as a `queued` row (`enqueue`) until
# every run before it in the conversation has ended, in arrival order. The rows are the
# queue: it holds across processes and restarts. Deciding and inserting happen in one
# transaction under the conversation's lock (an advisory lock on PostgreSQL; SQLite's
# IMMEDIATE transactions take turns anyway).

REJECT, ENQUEUE = "reject", "enqueue"


class ConversationBusy(Exception):
    """The conversation has an active run, `run_id`, and the strategy refuses another."""

    def __init__(self, run_id: str):
        self.run_id = run_id
        super().__init__(f"The conversation is busy with run {run_id}.")


def _lock_conversation(conversation_id: str) -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                           [f"conversation:{conversation_id}"])


def _active_runs(conversation_id: str):
    return AgentRun.objects.active().filter(conversation_id=conversation_id).order_by("id")


@sync_to_async
def active_runs(conversation_id: str) -> list[str]:
    """The conversation's queued and running runs, oldest first."""
    return list(_active_runs(conversation_id).values_list("run_id", flat=True))


@sync_to_async
def promote_queued(run_id: str, owner_id: str, user_transcript: dict | None,
                   scope_keys: dict[str, str],
                   history_of: tuple[str, str] | None = None,
                   deadline_at: datetime | None = None) -> StartedRun | str | None:
    """The queued run's turn, if it came: it is `running` from now on (its message joins the
    transcript now, after the replies of the runs before it; its deadline counts from now)
    and starts from the returned snapshot. None while a run before it is active; the run's status when it is no longer
    queued (cancelled meanwhile)."""
    now = timezone.now()
    row = AgentRun.objects.filter(run_id=run_id).values("id", "conversation_id").first()
    if row is not None and _active_runs(row["conversation_id"]).filter(
            id__lt=row["id"]).exists():
        return None  # a plain read while waiting: the write lock only when it looks free
    with transaction.atomic():
        row = AgentRun.objects.filter(run_id=run_id).values(
            "id", "run_id", "runner_id", "agent_id", "status", "conversation_id",
            "execution_owner_id").first()
        if row is None or row["status"] != RunStatus.QUEUED:
            return row["status"] if row else RunStatus.CANCELLED
        if row["execution_owner_id"] != owner_id:
            return RunStatus.QUEUED  # adopted by another process: it waits for it now
        _lock_conversation(row["conversation_id"])
        if _active_runs(row["conversation_id"]).filter(id__lt=row["id"]).exists():
            return None
        latest = _latest_entry(history_of) if history_of is not None else None
        promoted = AgentRun.objects.filter(run_id=run_id, status=RunStatus.QUEUED,
                                           execution_owner_id=owner_id).update(
            status=RunStatus.RUNNING, started_at=now, lease_expires_at=lease_end(now),
            updated_at=now, deadline_at=deadline_at)
        if not promoted:
            return AgentRun.objects.filter(run_id=run_id).values_list("status", flat=True).get()
        _started(row)
        if user_transcript:
            insert_rows(Transcript, [user_transcript])
    return StartedRun(runner_state.snapshot(scope_keys), str(latest) if latest else None)


def orphaned_queued_runs_sync(now=None) -> list[AgentRun]:
    """Queued runs nobody waits for: their process of this host is gone, or their lease ran
    out."""
    now = now or timezone.now()
    candidates = AgentRun.objects.active().filter(status=RunStatus.QUEUED).filter(
        Q(lease_expires_at__lt=now) | Q(execution_owner_id__startswith=f"{owners.HOST}:"))
    return [run for run in candidates.order_by("id")[:500]
            if (run.lease_expires_at is not None and run.lease_expires_at < now)
            or owners.owner_is_gone(run.execution_owner_id)]


def adopt_queued_sync(run_id: str, previous_owner: str, owner_id: str) -> bool:
    """Make a queued run `owner_id`'s to wait for, unless another process adopted it first."""
    return bool(AgentRun.objects.filter(
        run_id=run_id, status=RunStatus.QUEUED, execution_owner_id=previous_owner).update(
        execution_owner_id=owner_id, lease_expires_at=lease_end(timezone.now()),
        updated_at=timezone.now()))


@dataclass
class ResultWrite:
    """One result to append, with what it changes besides the event row."""

    sequence: int
    type: str
    data: dict
    usage: dict | None = None
    source: str = EventSource.RUNNER
    metadata: dict | None = None
    # When the result arrived (the row is written later, with others).
    created_at: datetime | None = None
    state: runner_state.StateWrite | None = None
    transcript: dict | None = None
    # (status, reason, usage, may_have_steering, may_have_model_calls): this result ends the
    # run, in the same transaction.
    finish: tuple[str, str, dict | None, bool, bool] | None = None


@dataclass
class RunResults:
    """What `record_results` writes for one run: its results in order, its model calls made
    meanwhile, and its own rows when its start was kept back."""

    run_id: str
    writes: list[ResultWrite]
    model_calls: list[dict] = ()
    start: PendingStart | None = None


@sync_to_async
def record_results(run_id: str, writes: list[ResultWrite],
                   model_calls: list[dict] = (), start: PendingStart | None = None) -> dict | None:
    """Append results in order with their state writes and transcript entries, and the run's
    model calls made meanwhile (`ModelCall` rows, first: a run's end sums them), in one
    transaction, after the run's own rows when its `start` was kept back. When one of the
    results ends the run, the run's outcome is returned (see `finish_run`)."""
    return _record_all([RunResults(run_id, writes, model_calls, start)])[0]


@sync_to_async
def record_many(batch: list[RunResults]) -> list[dict | None]:
    """`record_results` of several runs in one transaction (a group commit): each run's
    outcome, or None, in order. One run's failure rolls back them all."""
    return _record_all(batch)


def _record_all(batch: list[RunResults]) -> list[dict | None]:
    events: list[dict] = []  # every run's, in as few statements as the database allows
    with transaction.atomic():
        ended = [_record(item.run_id, item.writes, item.model_calls, item.start, events)
                 for item in batch]
        if events:
            insert_rows(AgentRunEvent, events)
    for item in batch:
        if item.start is not None:
            _remember_grants(item.start.run)
    return ended


def _record(run_id: str, writes: list[ResultWrite], model_calls: list[dict],
            start: PendingStart | None, events: list[dict]) -> dict | None:
    """Write one run's start, model calls, state, transcript entries and end; its events are
    added to `events`, which the batch writes together."""
    ended = None
    if model_calls:
        insert_rows(ModelCall, list(model_calls))
        rollups.model_calls_recorded(list(model_calls))
    finish = next((write.finish for write in writes if write.finish is not None), None)
    if start is not None and finish is not None:
        # Started and ended in one batch: the row is written as it ends, not updated.
        ended = _write_start(start, finish)
        writes = [replace(write, finish=None) for write in writes]
    elif start is not None:
        _write_start(start)
    events += [
        {"run_id": run_id, "sequence": w.sequence, "type": w.type, "data_json": w.data,
         "usage_json": w.usage, "source": w.source, "metadata_json": w.metadata or {},
         "created_at": w.created_at or timezone.now()}
        for w in writes]
    for write in writes:
        if write.state is not None:
            runner_state.upsert(write.state)
        if write.transcript is not None:
            insert_rows(Transcript, [write.transcript])
        if write.finish is not None:
            ended = _finish_sync(run_id, *write.finish)
    return ended


_TERMINAL_IN = ", ".join(["%s"] * len(TERMINAL_STATUSES))


def _finish_sync(run_id: str, status: str, reason: str, usage: dict | None,
                 may_have_steering: bool = True,
                 may_have_model_calls: bool = True) -> dict:
    fields = _ended_fields(run_id, status, reason, usage, may_have_model_calls)
    ended = update_returning(AgentRun, fields, f"run_id = %s AND status NOT IN ({_TERMINAL_IN})",
                             [run_id, *TERMINAL_STATUSES], OUTCOME_FIELDS)
    if ended:
        rollups.run_ended(ended)
    if may_have_steering:  # items are only queued for runners that declare steering
        drop_queued_steering([run_id], fields["finished_at"])
    return outcome_dict(ended) if ended else run_outcome_sync(run_id)


def _ended_fields(run_id: str, status: str, reason: str, usage: dict | None,
                  may_have_model_calls: bool = True) -> dict:
    """What a run's row changes as it ends."""
    if status not in TERMINAL_STATUSES:
        raise ValueError(f"{status!r} is not a terminal run status")
    now = timezone.now()
    fields = {"status": status, "status_reason": reason[:10_000], "finished_at": now,
              "updated_at": now, "lease_expires_at": None}
    if usage is None and may_have_model_calls:  # the runner reported none: what its model
        usage = run_usage(run_id)               # calls spent, if any
    if usage is not None:
        fields["usage_json"] = usage
    return fields


@sync_to_async
def finish_run(run_id: str, status: str, reason: str = "", usage: dict | None = None,
               may_have_steering: bool = True,
               may_have_model_calls: bool = True) -> dict:
    """Move a run to a terminal status once; leftover steering items are marked dropped.

    Returns the run's outcome (`ledger.selectors.runs.outcome_dict`), read in the same
    transaction: a run that had already ended keeps its own status and reason.
    """
    with transaction.atomic():
        return _finish_sync(run_id, status, reason, usage, may_have_steering,
                            may_have_model_calls)


def transcript_text(content) -> str:
    """A message's text as its transcript entry's `content`: cut past TRANSCRIPT_MAX_CHARS,
    with a marker saying how much more there is."""
    text = message_text(content)
    if len(text) <= TRANSCRIPT_MAX_CHARS:
        return text
    return (f"{text[:TRANSCRIPT_MAX_CHARS]} … [cut: {len(text) - TRANSCRIPT_MAX_CHARS:,} more "
            f"characters, kept whole in the entry's message]")
