"""Usage and cost of model calls, summed from the ledger's `ModelCall` rows."""

from decimal import Decimal

from django.db.models import Count, Sum

from ledger.models import ModelCall


def _totals(calls) -> dict:
    """`{calls, input_tokens, output_tokens, cached_tokens, cost}`; cost is a Decimal."""
    sums = calls.aggregate(calls=Count("pk"), input_tokens=Sum("input_tokens"),
                           output_tokens=Sum("output_tokens"),
                           cached_tokens=Sum("cached_tokens"), cost=Sum("cost"))
    return {key: value or (Decimal(0) if key == "cost" else 0) for key, value in sums.items()}


def of_run(run_id: str):
    """The run's calls, on the index of their run."""
    return ModelCall.objects.filter(run_id=run_id)


def usage_for_run(run_id: str) -> dict:
    """Every attempt of the run's calls, failed ones included (they may have cost tokens)."""
    return _totals(ModelCall.objects.filter(run_id=run_id))


def usage_for_agent(agent_id: str) -> dict:
    return _totals(ModelCall.objects.filter(agent_id=agent_id))


def run_usage(run_id: str) -> dict | None:
    """The run's calls summed in the SDK's usage shape (with their `cost`), or None when it
    made none: the usage of a run whose runner reports none."""
    totals = usage_for_run(run_id)
    if not totals["calls"]:
        return None
    return {"prompt_tokens": totals["input_tokens"], "completion_tokens": totals["output_tokens"],
            "total_tokens": totals["input_tokens"] + totals["output_tokens"],
            "cached_tokens": totals["cached_tokens"], "cost": float(totals["cost"])}
