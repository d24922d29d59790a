"""Record model calls: one row per attempt, whoever made it."""

from ledger.models import ModelCall


async def record_model_call(**fields) -> None:
    """Store one attempt (`ModelCall` fields: run_id, agent_id, caller, model_id, status,
    tokens, cost, latency_ms, ...) in one INSERT."""
    await ModelCall.objects.acreate(**fields)
