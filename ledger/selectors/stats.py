"""Read-side summaries of the run ledger."""

from ledger.models import AgentRun, RunStatus
from ledger.selectors.model_calls import usage_for_agent


def agent_run_totals(agent_id: str) -> dict:
    """Completed runs of one agent, and the tokens (input + output) and cost of its model
    calls: every attempt, failed ones included, whatever the run's runner reported."""
    usage = usage_for_agent(agent_id)
    return {
        "total_tasks_completed": AgentRun.objects.filter(
            agent_id=agent_id, status=RunStatus.COMPLETED).count(),
        "total_tokens_used": usage["input_tokens"] + usage["output_tokens"],
        # Summed as Decimals (8 places) in the database; a float only for the JSON number.
        "total_cost_incurred": float(usage["cost"]),
    }
