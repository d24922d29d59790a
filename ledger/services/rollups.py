"""Rollups: totals kept as the ledger is written, so reading them never sums the ledger.

Each increment runs in the transaction that writes what it counts (a run's end, a model
call); `rebuild()` recomputes every row from the ledger (`manage.py rebuild_rollups`).
"""

from decimal import Decimal

from django.db import IntegrityError, transaction
from django.db.models import Count, F, Sum
from django.utils import timezone

from ledger.models import AgentRun, AgentTotals, ModelCall, RunStatus


def _add(agent_id: str, **amounts) -> None:
    if not agent_id or not any(amounts.values()):
        return
    increments = {field: F(field) + amount for field, amount in amounts.items()}
    if AgentTotals.objects.filter(agent_id=agent_id).update(**increments,
                                                           updated_at=timezone.now()):
        return
    try:
        with transaction.atomic():  # a savepoint: another writer may create it first
            AgentTotals.objects.create(agent_id=agent_id, **amounts)
    except IntegrityError:
        AgentTotals.objects.filter(agent_id=agent_id).update(**increments)


def run_completed(agent_id: str) -> None:
    _add(agent_id, completed_runs=1)


def model_calls_recorded(rows: list[dict]) -> None:
    """Add a batch of `ModelCall` rows (as inserted) to their agents' totals."""
    by_agent: dict[str, dict] = {}
    for row in rows:
        totals = by_agent.setdefault(row.get("agent_id") or "", {
            "input_tokens": 0, "output_tokens": 0, "cost": Decimal(0)})
        totals["input_tokens"] += int(row.get("input_tokens") or 0)
        totals["output_tokens"] += int(row.get("output_tokens") or 0)
        totals["cost"] += Decimal(str(row.get("cost") or 0))
    for agent_id, totals in by_agent.items():
        _add(agent_id, **totals)


def rebuild() -> int:
    """Recompute every agent's totals from the ledger, in one transaction (the increments of
    runs ending meanwhile wait for it); the number of agents."""
    with transaction.atomic():
        return _rebuilt()


def _rebuilt() -> int:
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
