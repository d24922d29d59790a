"""Rollups: totals kept as the ledger is written, so reading them never sums the ledger.

Each increment runs in the transaction that writes what it counts (a run's end, a model
call); `rebuild()` recomputes every row from the ledger (`manage.py rebuild_rollups`).

- `AgentTotals`: an agent's completed runs, tokens and cost (its metrics);
- `RunHour`: ended runs by creation hour, runner and status (the dashboard's runs);
- `ModelCallDay`: model calls, failures, tokens and cost by day (the dashboard's spend).
"""

from datetime import UTC, datetime
from decimal import Decimal

from django.db import IntegrityError, transaction
from django.db.models import Count, Max, Q, Sum
from django.db.models.functions import TruncDate, TruncHour
from django.utils import timezone

from ledger import signals
from ledger.models import (
    TERMINAL_STATUSES,
    AgentRun,
    AgentTotals,
    ModelCall,
    ModelCallDay,
    RunHour,
    RunStatus,
)
from ledger.sql import add_to_row

# As for runs: a cancelled call was stopped on purpose, it did not fail.
MODEL_CALL_FAILURES = (ModelCall.Status.ERROR, ModelCall.Status.TIMEOUT)


def _add(model, key: dict, amounts: dict, **latest) -> None:
    """Add `amounts` to the row of `key` (made when missing), and set its `latest` values.
    On every run's end: lean SQL (`ledger.sql`), not a compiled queryset."""
    if add_to_row(model, key, amounts, latest):
        return
    try:
        with transaction.atomic():  # a savepoint: another writer may create it first
            model.objects.create(**key, **amounts, **latest)
    except IntegrityError:
        add_to_row(model, key, amounts, latest)


def hour_of(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


ENDED_FIELDS = ("run_id", "agent_id", "runner_id", "created_at", "started_at")


def run_ended(run: dict) -> None:
    """Count a run that just ended (its `run_id`, `agent_id`, `runner_id`, `created_at`,
    `started_at`, `finished_at` and terminal `status`), and tell the listeners once
    committed (`ledger.signals.run_ended`)."""
    signals.send_on_commit(signals.run_ended, run={
        name: run.get(name) for name in (*ENDED_FIELDS, "status", "finished_at")})
    if run["status"] == RunStatus.COMPLETED and run.get("agent_id"):
        _add(AgentTotals, {"agent_id": run["agent_id"]}, {"completed_runs": 1},
             updated_at=timezone.now())
    _add(RunHour, {"hour": hour_of(run["created_at"]), "runner_id": run["runner_id"],
                   "status": run["status"]}, {"runs": 1}, last_run_id=run["run_id"])


def end_runs(runs, **fields) -> list[str]:
    """End the active runs of queryset `runs` with `fields` (a terminal `status` among them),
    counted; the ids of those it ended."""
    with transaction.atomic():
        ended = list(runs.exclude(status__in=TERMINAL_STATUSES).select_for_update()
                     .values(*ENDED_FIELDS))
        if ended:
            AgentRun.objects.filter(run_id__in=[run["run_id"] for run in ended]).exclude(
                status__in=TERMINAL_STATUSES).update(**fields)
        for run in ended:
            run_ended({**run, "status": fields["status"], "finished_at": fields["finished_at"]})
    return [run["run_id"] for run in ended]


def model_calls_recorded(rows: list[dict]) -> None:
    """Add a batch of `ModelCall` rows (as inserted, now) to their agents' and today's
    totals."""
    by_agent: dict[str, dict] = {}
    today = {"calls": 0, "failures": 0, "input_tokens": 0, "output_tokens": 0,
             "cost": Decimal(0)}
    for row in rows:
        spent = {"input_tokens": int(row.get("input_tokens") or 0),
                 "output_tokens": int(row.get("output_tokens") or 0),
                 "cost": Decimal(str(row.get("cost") or 0))}
        totals = by_agent.setdefault(row.get("agent_id") or "", dict.fromkeys(spent, 0))
        for field, amount in spent.items():
            totals[field] += amount
            today[field] += amount
        today["calls"] += 1
        today["failures"] += row.get("status") in MODEL_CALL_FAILURES
    for agent_id, totals in by_agent.items():
        if agent_id and any(totals.values()):
            _add(AgentTotals, {"agent_id": agent_id}, totals, updated_at=timezone.now())
    if today["calls"]:
        _add(ModelCallDay, {"day": timezone.localdate()}, today)
        signals.send_on_commit(signals.model_calls_recorded, rows=list(rows))


def rebuild() -> int:
    """Recompute every rollup from the ledger, in one transaction (the increments of runs
    ending meanwhile wait for it); the number of rows written."""
    with transaction.atomic():
        return _agent_totals() + _run_hours() + _model_call_days()


def _agent_totals() -> int:
    totals: dict[str, dict] = {}
    for row in (AgentRun.objects.filter(status=RunStatus.COMPLETED).exclude(agent_id="")
                .values("agent_id").annotate(n=Count("id")).order_by()):
        totals.setdefault(row["agent_id"], {})["completed_runs"] = row["n"]
    for row in (ModelCall.objects.exclude(agent_id="").values("agent_id").annotate(
            input_tokens=Sum("input_tokens"), output_tokens=Sum("output_tokens"),
            cost=Sum("cost")).order_by()):
        totals.setdefault(row.pop("agent_id"), {}).update(row)
    AgentTotals.objects.all().delete()
    AgentTotals.objects.bulk_create([AgentTotals(agent_id=agent_id, **values)
                                     for agent_id, values in totals.items()])
    return len(totals)


def _run_hours() -> int:
    rows = (AgentRun.objects.filter(status__in=TERMINAL_STATUSES)
            .annotate(hour=TruncHour("created_at", tzinfo=UTC))
            .values("hour", "runner_id", "status")
            .annotate(runs=Count("id"), last=Max("id")).order_by())
    hours = list(rows)
    last_ids = dict(AgentRun.objects.filter(id__in=[row["last"] for row in hours])
                    .values_list("id", "run_id"))
    RunHour.objects.all().delete()
    RunHour.objects.bulk_create([
        RunHour(hour=row["hour"], runner_id=row["runner_id"], status=row["status"],
                runs=row["runs"], last_run_id=last_ids.get(row["last"], ""))
        for row in hours])
    return len(hours)


def _model_call_days() -> int:
    days = list(ModelCall.objects.annotate(day=TruncDate("created_at")).values("day").annotate(
        calls=Count("id"), input_tokens=Sum("input_tokens"), output_tokens=Sum("output_tokens"),
        cost=Sum("cost"), failures=Count("id", filter=Q(status__in=MODEL_CALL_FAILURES)))
        .order_by())
    ModelCallDay.objects.all().delete()
    ModelCallDay.objects.bulk_create([ModelCallDay(**row) for row in days])
    return len(days)
