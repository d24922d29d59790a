"""Write side of interactions: asked by a run, answered once."""

from asgiref.sync import sync_to_async
from django.utils import timezone

from ledger.models import Interaction


@sync_to_async
def create(**fields) -> Interaction:
    return Interaction.objects.create(**fields)


def claim_sync(pk: int, submission: dict, resume_run_id: str) -> bool:
    """Record the answer, once: False when it was answered (or expired) meanwhile."""
    now = timezone.now()
    return bool(Interaction.objects.filter(
        pk=pk, status=Interaction.Status.PENDING, expires_at__gt=now).update(
        status=Interaction.Status.SUBMITTED, submission_json=submission, submitted_at=now,
        resume_run_id=resume_run_id))
