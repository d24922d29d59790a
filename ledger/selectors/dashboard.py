"""The ledger's numbers for the admin dashboard (runs, model calls): a few queries."""

import math
from datetime import datetime, time, timedelta
from decimal import Decimal

from django.db.models import Count, Max, Q, Sum
from django.db.models.functions import TruncDate, TruncHour
from django.utils import timezone

from ledger.models import AgentRun, ModelCall, RunStatus

FAILURE_STATUSES = (RunStatus.FAILED, RunStatus.TIMEOUT)
# As for runs: a cancelled call was stopped on purpose, it did not fail.
MODEL_CALL_FAILURES = (ModelCall.Status.ERROR, ModelCall.Status.TIMEOUT)
STATUS_ORDER = [status.value for status in RunStatus]


def percentile(values, fraction: float) -> float | None:
    """Nearest-rank percentile (`fraction` in 0..1) of the values; None when there are none."""
    ordered = sorted(values)
    if not ordered:
        return None
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def window_start(now, hours: int):
    """The start of the window: whole hours, the current (partial) hour being the last one."""
    return now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=hours - 1)


def run_summary(now=None, hours: int = 24, top: int = 5) -> dict:
    """Runs created in the last `hours` (by status, per hour), active runs, durations, failures.

    - `active`: queued or running runs, whenever they were created;
    - `by_status`: every status with its count in the window; `total` their sum;
    - `hourly`: `hours` buckets `{start, counts: {status: n}, total}`, oldest first;
    - `p50_seconds`, `p95_seconds`: nearest-rank percentiles of started→finished durations of
      the window's finished runs (`durations_count` of them); None when there are none;
    - `top_failing`: up to `top` runners with the most failed or timed-out runs in the
      window, each with its `failures`, `last_reason` and `last_failed_at`.
    """
    now = now or timezone.now()
    start = window_start(now, hours)
    recent = AgentRun.objects.filter(created_at__gte=start, created_at__lte=now)

    by_status = dict.fromkeys(STATUS_ORDER, 0)
    for row in recent.values("status").annotate(n=Count("id")).order_by():
        by_status[row["status"]] = row["n"]

    buckets = [{"start": start + timedelta(hours=i), "counts": dict.fromkeys(STATUS_ORDER, 0),
                "total": 0} for i in range(hours)]
    hourly_rows = (recent.annotate(hour=TruncHour("created_at")).values("hour", "status")
                   .annotate(n=Count("id")).order_by())
    for row in hourly_rows:
        index = int((row["hour"] - start).total_seconds() // 3600)
        if 0 <= index < hours:
            buckets[index]["counts"][row["status"]] += row["n"]
            buckets[index]["total"] += row["n"]

    durations = [
        (finished - started).total_seconds()
        for started, finished in recent.filter(started_at__isnull=False, finished_at__isnull=False)
        .values_list("started_at", "finished_at").iterator()
    ]

    failing = (recent.filter(status__in=FAILURE_STATUSES).values("runner_id")
               .annotate(failures=Count("id"), last_id=Max("id"))
               .order_by("-failures", "-last_id")[:top])
    last_runs = AgentRun.objects.in_bulk([row["last_id"] for row in failing])
    top_failing = []
    for row in failing:
        last = last_runs[row["last_id"]]
        top_failing.append({"runner_id": row["runner_id"], "failures": row["failures"],
                            "last_reason": last.status_reason, "last_status": last.status,
                            "last_failed_at": last.finished_at or last.created_at})

    return {
        "now": now, "window_start": start, "hours": hours,
        "active": AgentRun.objects.active().count(),
        "total": sum(by_status.values()), "by_status": by_status, "hourly": buckets,
        "durations_count": len(durations),
        "p50_seconds": percentile(durations, 0.50), "p95_seconds": percentile(durations, 0.95),
        "top_failing": top_failing,
    }


def model_call_days(now=None, days: int = 7) -> dict:
    """Model calls of the last `days` days, today the last, in one query grouped by day.

    - `daily`: `days` rows `{day, calls, input_tokens, output_tokens, cost, failures}`, oldest
      first, days without calls included (`cost` a Decimal, `failures` ended in error or
      timeout);
    - `calls`, `tokens` (input + output), `cost`, `failures`: the window's totals.
    """
    now = now or timezone.now()
    first = timezone.localdate(now) - timedelta(days=days - 1)
    start = timezone.make_aware(datetime.combine(first, time.min))
    rows = (ModelCall.objects.filter(created_at__gte=start, created_at__lte=now)
            .annotate(day=TruncDate("created_at")).values("day")
            .annotate(calls=Count("id"), input_tokens=Sum("input_tokens"),
                      output_tokens=Sum("output_tokens"), cost=Sum("cost"),
                      failures=Count("id", filter=Q(status__in=MODEL_CALL_FAILURES)))
            .order_by("day"))
    by_day = {row.pop("day"): row for row in rows}
    empty = {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cost": Decimal(0),
             "failures": 0}
    daily = [{"day": day, **by_day.get(day, empty)}
             for day in (first + timedelta(days=i) for i in range(days))]
    return {
        "days": days, "daily": daily,
        "calls": sum(row["calls"] for row in daily),
        "tokens": sum(row["input_tokens"] + row["output_tokens"] for row in daily),
        "cost": sum((row["cost"] for row in daily), Decimal(0)),
        "failures": sum(row["failures"] for row in daily),
    }
