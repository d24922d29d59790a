"""Record model calls: one row per attempt, whoever made it."""

from asgiref.sync import sync_to_async
from django.db import transaction

from ledger.models import ModelCall
from ledger.services import rollups


@sync_to_async
def record_model_call(**fields) -> None:
    """Store one attempt (`ModelCall` fields: run_id, agent_id, caller, model_id, status,
    tokens, cost, latency_ms, ...), added to its agent's totals in the same transaction."""
    with transaction.atomic():
        ModelCall.objects.create(**fields)
        rollups.model_calls_recorded([fields])
