"""The run ledger's numbers for the admin dashboard: one function, a few queries."""

import math
from datetime import timedelta

from django.db.models import Count, Max
from django.db.models.functions import TruncHour
from django.utils import timezone

from ledger.models import AgentRun, RunStatus

ACTIVE_STATUSES = (RunStatus.QUEUED, RunStatus.RUNNING)
FAILURE_STATUSES = (RunStatus.FAILED, RunStatus.TIMEOUT)
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
        "active": AgentRun.objects.filter(status__in=ACTIVE_STATUSES).count(),
        "total": sum(by_status.values()), "by_status": by_status, "hourly": buckets,
        "durations_count": len(durations),
        "p50_seconds": percentile(durations, 0.50), "p95_seconds": percentile(durations, 0.95),
        "top_failing": top_failing,
    }
