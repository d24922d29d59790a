"""Who executes a run: its lease, renewed by its process and reaped when that process is gone,
and cancel requests, which end at once a run nobody executes any more."""

from datetime import datetime, timedelta

from asgiref.sync import sync_to_async
from django.conf import settings
from django.utils import timezone

from ledger import owners
from ledger.models import (
    ACTIVE_STATUSES,
    TERMINAL_STATUSES,
    AgentRun,
    RunStatus,
    SteeringItem,
    SteeringStatus,
)
from ledger.services import rollups


def request_cancel_sync(run_id: str, reason: str = "") -> AgentRun | None:
    """Flag an active run for cancellation; a run whose owner is gone (its process of this
    host no longer runs, or its lease ran out) has nobody to stop it: it ends at once.
    Terminal runs are left as they are."""
    now = timezone.now()
    AgentRun.objects.filter(run_id=run_id, cancel_requested_at__isnull=True).exclude(
        status__in=TERMINAL_STATUSES
    ).update(cancel_requested_at=now, status_reason=reason or "cancel_requested", updated_at=now)
    # Nobody executes a queued run yet: it ends now (whoever waits for it sees so).
    rollups.end_runs(AgentRun.objects.filter(run_id=run_id, status=RunStatus.QUEUED),
                     status=RunStatus.CANCELLED, finished_at=now, updated_at=now,
                     lease_expires_at=None)
    run = AgentRun.objects.filter(run_id=run_id).first()
    if run is not None and run.status == RunStatus.RUNNING and (
            owners.owner_is_gone(run.execution_owner_id)
            or (run.lease_expires_at is not None and run.lease_expires_at < now)):
        _fail_running([run_id], f"{run.status_reason} (its host was gone)", now,
                      RunStatus.CANCELLED)
        run.refresh_from_db()
    return run


request_cancel = sync_to_async(request_cancel_sync)


def lease_end(now):
    return now + timedelta(seconds=settings.LANGHOST_RUN_LEASE_SECONDS)


@sync_to_async
def renew_leases(owner_id: str, run_ids: list[str]) -> int:
    """Keep the runs a process executes or waits to execute (still active, still its own)
    from being reaped or adopted."""
    return AgentRun.objects.filter(
        run_id__in=run_ids, execution_owner_id=owner_id, status__in=ACTIVE_STATUSES
    ).update(lease_expires_at=lease_end(timezone.now()))


LEASE_EXPIRED = "host.lease_expired: the host running this run stopped renewing its lease"


def reap_stale_runs_sync(now=None) -> list[str]:
    """Fail `running` runs whose owner is gone: a process of this host that no longer runs
    (failed at once), or any owner whose lease ran out."""
    now = now or timezone.now()
    running = AgentRun.objects.active().filter(status=RunStatus.RUNNING).order_by()
    reasons: dict[str, str] = dict.fromkeys(
        running.filter(lease_expires_at__lt=now).values_list("run_id", flat=True)[:500],
        LEASE_EXPIRED)
    local = set(running.filter(execution_owner_id__startswith=f"{owners.HOST}:")
                .values_list("execution_owner_id", flat=True).distinct())
    for owner in filter(owners.owner_is_gone, local):
        for run_id in running.filter(execution_owner_id=owner).values_list("run_id", flat=True):
            reasons[run_id] = (f"host.gone: the process running this run "
                               f"(pid {owners.owner_pid(owner)}) is gone")
    for reason in set(reasons.values()):
        _fail_running([run_id for run_id, why in reasons.items() if why == reason], reason, now)
    return list(reasons)


def _fail_running(run_ids: list[str], reason: str, now, status=RunStatus.FAILED) -> None:
    rollups.end_runs(AgentRun.objects.filter(run_id__in=run_ids, status=RunStatus.RUNNING),
                     status=status, finished_at=now, updated_at=now, lease_expires_at=None,
                     status_reason=reason)
    drop_queued_steering(run_ids, now)


def drop_queued_steering(run_ids: list[str], now: datetime) -> None:
    """The messages still queued for ended runs will never be taken."""
    SteeringItem.objects.filter(run_id__in=run_ids, status=SteeringStatus.QUEUED).update(
        status=SteeringStatus.DROPPED, reason="run_ended", updated_at=now)


def fail_owned_runs_sync(owner_id: str, reason: str, status=RunStatus.FAILED) -> list[str]:
    """End the runs `owner_id` still has `running` (a process that stops without them)."""
    run_ids = list(AgentRun.objects.active().filter(status=RunStatus.RUNNING,
                                                    execution_owner_id=owner_id)
                   .values_list("run_id", flat=True))
    _fail_running(run_ids, reason, timezone.now(), status)
    return run_ids


reap_stale_runs = sync_to_async(reap_stale_runs_sync)
