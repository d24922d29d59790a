"""pause / resume / terminate follow the status rules; invalid moves are 422s."""

import pytest

from runners.models import AgentInstance


def agent_url(agent):
    return f"/api/v1/projects/{agent.project_id}/agents/{agent.pk}"


def test_pause_idle_agent(user_client, agent):
    response = user_client.post(f"{agent_url(agent)}/pause")

    assert response.status_code == 200
    assert response.json()["status"] == "paused"
    agent.refresh_from_db()
    assert agent.status == "paused"


def test_pause_working_agent(user_client, make_agent, project, agent_type):
    agent = make_agent(project, agent_type, status="working")

    assert user_client.post(f"{agent_url(agent)}/pause").json()["status"] == "paused"


def test_resume_paused_agent(user_client, make_agent, project, agent_type):
    agent = make_agent(project, agent_type, status="paused")

    response = user_client.post(f"{agent_url(agent)}/resume")

    assert response.status_code == 200
    assert response.json()["status"] == "idle"


def test_terminate_returns_200_with_message(jwt_client, user, agent):
    response = jwt_client(user).delete(agent_url(agent))

    assert response.status_code == 200
    assert "terminated" in response.json()["message"]


def test_terminated_agent_row_stays(user_client, agent):
    user_client.delete(agent_url(agent))

    assert AgentInstance.objects.get(pk=agent.pk).status == "terminated"
    assert user_client.get(agent_url(agent)).json()["status"] == "terminated"


def test_resume_terminated_agent_gets_422_naming_status(user_client, agent):
    user_client.delete(agent_url(agent))

    response = user_client.post(f"{agent_url(agent)}/resume")

    assert response.status_code == 422
    body = response.json()
    assert "terminated" in body["detail"]
    assert body["current_status"] == "terminated"
    agent.refresh_from_db()
    assert agent.status == "terminated"


@pytest.mark.parametrize(
    ("status", "action"),
    [
        ("idle", "resume"),
        ("working", "resume"),
        ("paused", "pause"),
        ("terminated", "pause"),
    ],
)
def test_invalid_transition_gets_422_and_keeps_status(
    user_client, make_agent, project, agent_type, status, action
):
    agent = make_agent(project, agent_type, status=status)

    response = user_client.post(f"{agent_url(agent)}/{action}")

    assert response.status_code == 422
    assert status in response.json()["detail"]
    agent.refresh_from_db()
    assert agent.status == status


def test_terminating_twice_gets_422(user_client, agent):
    user_client.delete(agent_url(agent))

    response = user_client.delete(agent_url(agent))

    assert response.status_code == 422
    assert response.json()["current_status"] == "terminated"


def test_pause_unknown_agent_gets_404(user_client, project):
    response = user_client.post(
        f"/api/v1/projects/{project.pk}/agents/00000000-0000-0000-0000-000000000000/pause"
    )

    assert response.status_code == 404


def test_transition_endpoints_reject_get(user_client, agent):
    assert user_client.get(f"{agent_url(agent)}/pause").status_code == 405
