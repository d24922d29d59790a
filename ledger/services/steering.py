"""Steering: messages absorbed into an active run, queued until its runner pulls them."""

from asgiref.sync import sync_to_async
from django.db import transaction
from django.utils import timezone

from ledger.models import AgentRun, EventLog, RunStatus, SteeringItem, SteeringStatus, Transcript

STEERING_QUEUE_MAX = 100


@sync_to_async
def enqueue_steering(run_id: str, event_id: str, item: dict, event_log: dict,
                     user_transcript: dict | None) -> bool:
    """Queue a message for an active run; False when the run is gone or its queue is full."""
    with transaction.atomic():
        # The run's row stays locked until the item is in: the run cannot end (and drop its
        # queue) in between, and two messages cannot both take the queue's last place.
        active = AgentRun.objects.select_for_update().filter(
            run_id=run_id, status=RunStatus.RUNNING).values_list("pk", flat=True)
        if not active:
            return False
        queued = SteeringItem.objects.filter(run_id=run_id, status=SteeringStatus.QUEUED).count()
        if queued >= STEERING_QUEUE_MAX:
            return False
        EventLog.objects.create(**event_log)
        SteeringItem.objects.create(run_id=run_id, event_id=event_id, item_json=item)
        if user_transcript:
            Transcript.objects.create(**user_transcript)
    return True


@sync_to_async
def pull_steering(run_id: str, limit: int | None) -> list[dict]:
    """Hand queued items over, oldest first, and mark them injected."""
    with transaction.atomic():
        items = list(
            SteeringItem.objects.select_for_update()
            .filter(run_id=run_id, status=SteeringStatus.QUEUED)
            .order_by("id")[: limit or STEERING_QUEUE_MAX]
        )
        SteeringItem.objects.filter(pk__in=[item.pk for item in items]).update(
            status=SteeringStatus.INJECTED, updated_at=timezone.now()
        )
    return [item.item_json for item in items]
