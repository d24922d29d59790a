"""The ledger's numbers for the admin dashboard (runs, model calls), read from its rollups
(`ledger.services.rollups`) and the few runs still active: the same few queries however long
the ledger."""

import math
from datetime import UTC, timedelta
from decimal import Decimal

from django.db.models import Count, Max, Sum
from django.db.models.functions import TruncHour
from django.utils import timezone

from ledger.models import AgentRun, ModelCallDay, RunHour, RunStatus
from ledger.services.rollups import hour_of

FAILURE_STATUSES = (RunStatus.FAILED, RunStatus.TIMEOUT)
STATUS_ORDER = [status.value for status in RunStatus]
# The durations' percentiles are those of the window's latest runs to have ended, this many.
DURATION_SAMPLE = 1000


def percentile(values, fraction: float) -> float | None:
    """Nearest-rank percentile (`fraction` in 0..1) of the values; None when there are none."""
    ordered = sorted(values)
    if not ordered:
        return None
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def window_start(now, hours: int):
    """The start of the window: whole hours (UTC), the current (partial) hour the last one."""
    return hour_of(now) - timedelta(hours=hours - 1)


def run_summary(now=None, hours: int = 24, top: int = 5) -> dict:
    """Runs created in the last `hours` (by status, per hour), active runs, durations, failures.

    - `active`: queued or running runs, whenever they were created;
    - `by_status`: every status with its count in the window; `total` their sum;
    - `hourly`: `hours` buckets `{start, counts: {status: n}, total}`, oldest first;
    - `p50_seconds`, `p95_seconds`: nearest-rank percentiles of started→finished durations of
      the window's latest DURATION_SAMPLE runs to have ended (`durations_count` of them);
      None when there are none;
    - `top_failing`: up to `top` runners with the most failed or timed-out runs in the
      window, each with its `failures`, `last_reason` and `last_failed_at`.

    Ended runs are counted from `RunHour`, the active ones from the ledger (they are few).
    """
    now = now or timezone.now()
    start = window_start(now, hours)
    ended = RunHour.objects.filter(hour__gte=start, hour__lte=now)
    active = AgentRun.objects.active()
    by_status = dict.fromkeys(STATUS_ORDER, 0)
    buckets = [{"start": start + timedelta(hours=i), "counts": dict.fromkeys(STATUS_ORDER, 0),
                "total": 0} for i in range(hours)]
    counted = [(row["hour"], row["status"], row["n"]) for row in
               ended.values("hour", "status").annotate(n=Sum("runs")).order_by()]
    counted += [(row["hour"], row["status"], row["n"]) for row in
                active.filter(created_at__gte=start, created_at__lte=now)
                .annotate(hour=TruncHour("created_at", tzinfo=UTC)).values("hour", "status")
                .annotate(n=Count("id")).order_by()]
    for hour, status, count in counted:
        by_status[status] += count
        index = int((hour - start).total_seconds() // 3600)
        if 0 <= index < hours:
            buckets[index]["counts"][status] += count
            buckets[index]["total"] += count

    durations = [
        (finished - started).total_seconds()
        for started, finished in AgentRun.objects.filter(
            created_at__gte=start, created_at__lte=now, started_at__isnull=False,
            finished_at__isnull=False).order_by("-id")
        .values_list("started_at", "finished_at")[:DURATION_SAMPLE]
    ]

    failing = list(ended.filter(status__in=FAILURE_STATUSES).values("runner_id")
                   .annotate(failures=Sum("runs"), latest_hour=Max("hour"))
                   .order_by("-failures", "-latest_hour")[:top])
    last_ids = {row["runner_id"]: ended.filter(
        runner_id=row["runner_id"], status__in=FAILURE_STATUSES, hour=row["latest_hour"])
        .values_list("last_run_id", flat=True).first() for row in failing}
    last_runs = AgentRun.objects.in_bulk([run_id for run_id in last_ids.values() if run_id],
                                         field_name="run_id")
    top_failing = []
    for row in failing:
        last = last_runs.get(last_ids[row["runner_id"]])
        top_failing.append({"runner_id": row["runner_id"], "failures": row["failures"],
                            "last_reason": last.status_reason if last else "",
                            "last_status": last.status if last else "",
                            "last_failed_at": (last.finished_at or last.created_at)
                            if last else None})

    return {
        "now": now, "window_start": start, "hours": hours,
        "active": active.count(),
        "total": sum(by_status.values()), "by_status": by_status, "hourly": buckets,
        "durations_count": len(durations),
        "p50_seconds": percentile(durations, 0.50), "p95_seconds": percentile(durations, 0.95),
        "top_failing": top_failing,
    }


def model_call_days(now=None, days: int = 7) -> dict:
    """Model calls of the last `days` days, today the last, from `ModelCallDay`.

    - `daily`: `days` rows `{day, calls, input_tokens, output_tokens, cost, failures}`, oldest
      first, days without calls included (`cost` a Decimal, `failures` ended in error or
      timeout);
    - `calls`, `tokens` (input + output), `cost`, `failures`: the window's totals.
    """
    now = now or timezone.now()
    first = timezone.localdate(now) - timedelta(days=days - 1)
    fields = ("calls", "input_tokens", "output_tokens", "cost", "failures")
    by_day = {row.pop("day"): row for row in ModelCallDay.objects.filter(
        day__gte=first, day__lte=timezone.localdate(now)).values("day", *fields)}
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
