"""Read-side summaries of the run ledger."""

from ledger.models import AgentRun, RunStatus


def _tokens(usage) -> int:
    if not isinstance(usage, dict):
        return 0
    total = usage.get("total_tokens")
    if isinstance(total, int | float):
        return int(total)
    return sum(
        int(usage.get(key) or 0)
        for key in ("prompt_tokens", "completion_tokens", "input_tokens", "output_tokens")
        if isinstance(usage.get(key) or 0, int | float)
    )


def _cost(cost) -> float:
    if isinstance(cost, int | float):
        return float(cost)
    if isinstance(cost, dict):
        total = cost.get("total", cost.get("amount", 0))
        return float(total) if isinstance(total, int | float) else 0.0
    return 0.0


def agent_run_totals(agent_id: str) -> dict:
    """Completed runs, tokens and cost of one agent, from its runs' usage (cost: the run's
    `cost_json`, else `usage.cost` / `usage.total_cost`)."""
    runs = AgentRun.objects.filter(agent_id=agent_id, status=RunStatus.COMPLETED)
    tasks = tokens = 0
    cost = 0.0
    for usage, run_cost in runs.values_list("usage_json", "cost_json").iterator():
        tasks += 1
        tokens += _tokens(usage)
        if run_cost is None and isinstance(usage, dict):  # runners report cost in their usage
            run_cost = usage.get("cost", usage.get("total_cost"))
        cost += _cost(run_cost)
    return {"total_tasks_completed": tasks, "total_tokens_used": tokens, "total_cost_incurred": cost}
