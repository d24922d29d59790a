import io
from decimal import Decimal

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command

from ledger.models import AgentRun, AgentTotals, ModelCall
from ledger.services import runs
from ledger.services.model_calls import record_model_call

pytestmark = pytest.mark.backend

KEYS = {
    "total_instances",
    "active_instances",
    "idle_instances",
    "total_tasks_completed",
    "total_tokens_used",
    "total_cost_incurred",
}


def metrics_url(agent):
    return f"/api/v1/projects/{agent.project_id}/agents/{agent.pk}/metrics"


def test_metrics_has_exactly_the_six_keys(user_client, agent):
    response = user_client.get(metrics_url(agent))

    assert response.status_code == 200
    assert set(response.json()) == KEYS


def test_metrics_are_zero_before_any_run(user_client, agent):
    body = user_client.get(metrics_url(agent)).json()

    assert body["total_tasks_completed"] == 0
    assert body["total_tokens_used"] == 0
    assert body["total_cost_incurred"] == 0
    assert body["total_instances"] == 1
    assert body["idle_instances"] == 1
    assert body["active_instances"] == 0


def test_instance_counts_cover_the_agents_project(user_client, agent, make_agent, make_project, user):
    make_agent(agent.project, agent.agent_type, status="working")
    make_agent(agent.project, agent.agent_type, status="paused")
    make_agent(agent.project, agent.agent_type, status="terminated")
    make_agent(make_project(user), agent.agent_type)  # another project: not counted

    body = user_client.get(metrics_url(agent)).json()

    assert body["total_instances"] == 4
    assert body["active_instances"] == 1
    assert body["idle_instances"] == 1


def make_run(agent, n, status="completed", usage=None):
    """A run of the agent, ended with `status` by the ledger's own service (which keeps the
    agent's totals)."""
    run = AgentRun.objects.create(
        run_id=f"run-{n}", event_id=f"event-{n}", runner_id="builtin:echo",
        agent_id=str(agent.pk), project_id=str(agent.project_id), status="running")
    async_to_sync(runs.finish_run)(run.run_id, status, usage=usage)
    return run


def make_call(agent, input_tokens, output_tokens, status="ok"):
    price = Decimal("0.15") / 1_000_000  # per token
    async_to_sync(record_model_call)(
        run_id="run-1", agent_id=str(agent.pk), model_id="m-1", model_name="gpt", status=status,
        input_tokens=input_tokens, output_tokens=output_tokens,
        cost=(input_tokens + output_tokens) * price)
    return ModelCall.objects.filter(agent_id=str(agent.pk)).latest("id")


def test_tasks_are_the_completed_runs(user_client, agent):
    make_run(agent, 1)
    make_run(agent, 2)
    make_run(agent, 3, status="failed")

    assert user_client.get(metrics_url(agent)).json()["total_tasks_completed"] == 2


def test_tokens_and_cost_sum_the_agents_model_calls_exactly(user_client, agent, make_agent):
    make_run(agent, 1, usage={"total_tokens": 999})  # what a runner reports is not added
    mine = [make_call(agent, 1200, 345), make_call(agent, 77, 0, status="error"),
            make_call(agent, 3, 1_000_001)]
    make_call(make_agent(agent.project, agent.agent_type), 500, 500)  # another agent's
    for call in mine:
        call.refresh_from_db()  # the cost as stored

    body = user_client.get(metrics_url(agent)).json()

    assert body["total_tokens_used"] == sum(c.input_tokens + c.output_tokens for c in mine)
    assert body["total_cost_incurred"] == float(sum(c.cost for c in mine))


def test_totals_are_kept_as_runs_end_and_rebuilt_the_same_from_the_ledger(
        user_client, agent):
    make_run(agent, 1)
    make_run(agent, 2, status="failed")
    make_call(agent, 10, 5)
    async_to_sync(runs.finish_run)("run-1", "failed")  # ended already: counted once
    kept = user_client.get(metrics_url(agent)).json()
    AgentTotals.objects.all().delete()

    call_command("rebuild_rollups", stdout=io.StringIO())

    assert user_client.get(metrics_url(agent)).json() == kept
    assert (kept["total_tasks_completed"], kept["total_tokens_used"]) == (1, 15)
