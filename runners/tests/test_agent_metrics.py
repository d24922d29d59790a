import pytest

from ledger.models import AgentRun

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


def make_run(agent, n, status="completed", usage=None, cost=None):
    return AgentRun.objects.create(
        run_id=f"run-{n}",
        event_id=f"event-{n}",
        runner_id="builtin:echo",
        agent_id=str(agent.pk),
        project_id=str(agent.project_id),
        status=status,
        usage_json=usage,
        cost_json=cost,
    )


def test_completed_runs_add_tasks_tokens_and_cost(user_client, agent):
    make_run(agent, 1, usage={"total_tokens": 120}, cost=0.25)
    make_run(agent, 2, usage={"prompt_tokens": 10, "completion_tokens": 5}, cost={"total": 0.5})
    make_run(agent, 3, status="failed", usage={"total_tokens": 999}, cost=9.0)

    body = user_client.get(metrics_url(agent)).json()

    assert body["total_tasks_completed"] == 2
    assert body["total_tokens_used"] == 135
    assert body["total_cost_incurred"] == pytest.approx(0.75)


def test_runs_of_other_agents_are_not_counted(user_client, agent, make_agent):
    other = make_agent(agent.project, agent.agent_type)
    make_run(other, 1, usage={"total_tokens": 50}, cost=1.0)

    body = user_client.get(metrics_url(agent)).json()

    assert body["total_tasks_completed"] == 0
    assert body["total_tokens_used"] == 0
