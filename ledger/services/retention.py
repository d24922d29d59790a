"""Retention: ended runs older than a limit leave the ledger, with their events, transcript
lines, event log rows, model calls, steering items and questions; optionally written first
to compressed JSON Lines (one run a line, with what goes with it).

It works in batches of BATCH runs, one short transaction each, so no lock is held long. A
conversation whose runs are all gone and that nothing touched since the limit goes too, with
its files; one that still has newer runs keeps them. Rollups (`AgentTotals`) are not
touched: metrics stay what they were.

SQLite gives the pages back with `PRAGMA incremental_vacuum` (databases LangHost creates are
`auto_vacuum=INCREMENTAL`; an older file needs one `VACUUM`, `prune_ledger --vacuum`);
PostgreSQL's autovacuum reuses them.
"""

import gzip
import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from ledger.models import (
    TERMINAL_STATUSES,
    AgentRun,
    AgentRunEvent,
    Conversation,
    EventLog,
    Interaction,
    ModelCall,
    SteeringItem,
    Transcript,
)
from ledger.services import conversations

BATCH = 500
VACUUM_PAGES = 2000


@dataclass
class Pruned:
    runs: int = 0
    events: int = 0
    conversations: int = 0
    archive: str | None = None
    counts: dict = field(default_factory=dict)


def cutoff(days: int | None = None) -> datetime | None:
    """The moment before which ended runs are removed (LANGHOST_LEDGER_RETENTION_DAYS), or
    None when retention is off."""
    days = settings.LANGHOST_LEDGER_RETENTION_DAYS if days is None else days
    return timezone.now() - timezone.timedelta(days=days) if days else None


def _rows(model, **match) -> list[dict]:
    return [{key: _plain(value) for key, value in row.items()}
            for row in model.objects.filter(**match).order_by("id").values()]


def _plain(value):
    if isinstance(value, datetime):
        return value.isoformat()
    return value if isinstance(value, (str, int, float, bool, list, dict, type(None))) \
        else str(value)


def prune(before: datetime, archive: Path | None = None) -> Pruned:
    """Remove the ended runs created before `before` (and what goes with them)."""
    pruned = Pruned(archive=str(archive) if archive else None)
    out = gzip.open(archive, "wt", encoding="utf-8") if archive else None
    try:
        while True:
            batch = list(AgentRun.objects.filter(
                created_at__lt=before, status__in=TERMINAL_STATUSES).order_by("id")
                .values_list("id", "run_id", "event_id")[:BATCH])
            if not batch:
                break
            run_ids = [run_id for _, run_id, _ in batch]
            if out is not None:
                for run_id in run_ids:
                    out.write(json.dumps(_archived(run_id), ensure_ascii=False) + "\n")
            with transaction.atomic():
                pruned.events += _remove(run_ids, [event_id for _, _, event_id in batch])
                pruned.runs += AgentRun.objects.filter(id__in=[pk for pk, _, _ in batch]) \
                    .delete()[0]
    finally:
        if out is not None:
            out.close()
    pruned.conversations = _prune_conversations(before)
    return pruned


def _archived(run_id: str) -> dict:
    return {"run": _rows(AgentRun, run_id=run_id)[0],
            "events": _rows(AgentRunEvent, run_id=run_id),
            "transcript": _rows(Transcript, run_id=run_id),
            "event_log": _rows(EventLog, run_id=run_id),
            "model_calls": _rows(ModelCall, run_id=run_id),
            "interactions": [{key: value for key, value in row.items() if key != "token_hash"}
                             for row in _rows(Interaction, run_id=run_id)]}


def _remove(run_ids: list[str], event_ids: list[str]) -> int:
    events = AgentRunEvent.objects.filter(run_id__in=run_ids).delete()[0]
    SteeringItem.objects.filter(run_id__in=run_ids).delete()
    # The user's lines carry the run's event id, its replies the run id.
    Transcript.objects.filter(Q(run_id__in=run_ids) | Q(event_id__in=event_ids,
                                                        run_id="")).delete()
    EventLog.objects.filter(run_id__in=run_ids).delete()
    ModelCall.objects.filter(run_id__in=run_ids).delete()
    Interaction.objects.filter(run_id__in=run_ids).delete()
    return events


def _prune_conversations(before: datetime) -> int:
    """Conversations untouched since `before` whose runs are all gone."""
    removed = 0
    stale = Conversation.objects.filter(updated_at__lt=before).order_by("id")
    for conversation in stale.iterator(chunk_size=BATCH):
        if not AgentRun.objects.filter(conversation_id=conversation.conversation_id).exists():
            conversations.delete(conversation)
            removed += 1
    return removed


def reclaim_space(full: bool = False) -> str:
    """Give the freed pages back to the file system (SQLite); what was done."""
    if connection.vendor != "sqlite":
        return "PostgreSQL's autovacuum reuses the freed space"
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA auto_vacuum")
        mode = cursor.fetchone()[0]
        if full or mode != 2:
            if not full:
                return ("this SQLite file is not auto_vacuum=INCREMENTAL: run with --vacuum "
                        "once (a full VACUUM; writes wait meanwhile)")
            cursor.execute("PRAGMA auto_vacuum=INCREMENTAL")
            cursor.execute("VACUUM")
            return "VACUUM"
        # A few pages a statement, each its own short write, until none is free.
        while True:
            cursor.execute(f"PRAGMA incremental_vacuum({VACUUM_PAGES})")
            cursor.fetchall()  # it frees a page a step: read to its end
            cursor.execute("PRAGMA freelist_count")
            if cursor.fetchone()[0] == 0:
                return "incremental vacuum"
