"""Read-side summaries of the run ledger."""

from ledger.models import AgentTotals


def agent_run_totals(agent_id: str) -> dict:
    """Completed runs of one agent, and the tokens (input + output) and cost of its model
    calls: every attempt, failed ones included, whatever the run's runner reported. Read
    from its rollup row (`ledger.services.rollups`), not summed from the ledger."""
    totals = AgentTotals.objects.filter(agent_id=agent_id).first() or AgentTotals()
    return {
        "total_tasks_completed": totals.completed_runs,
        "total_tokens_used": totals.input_tokens + totals.output_tokens,
        # Summed as Decimals (8 places) in the database; a float only for the JSON number.
        "total_cost_incurred": float(totals.cost),
    }
