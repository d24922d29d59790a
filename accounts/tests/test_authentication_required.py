"""Every endpoint except register, login and refresh needs a token (401 without one)."""

import pytest

from accounts.models import Project

ENDPOINTS = [
    ("get", "/api/v1/auth/me"),
    ("get", "/api/v1/projects"),
    ("post", "/api/v1/projects"),
    ("get", "/api/v1/projects/{project}"),
    ("patch", "/api/v1/projects/{project}"),
    ("delete", "/api/v1/projects/{project}"),
    ("get", "/api/v1/projects/{project}/members"),
    ("post", "/api/v1/projects/{project}/members"),
    ("get", "/api/v1/agent-types"),
    ("post", "/api/v1/agent-types"),
    ("get", "/api/v1/agent-types/{agent_type}"),
    ("patch", "/api/v1/agent-types/{agent_type}"),
    ("delete", "/api/v1/agent-types/{agent_type}"),
    ("get", "/api/v1/agent-types/slug/{agent_type_slug}"),
    ("get", "/api/v1/projects/{project}/agents"),
    ("post", "/api/v1/projects/{project}/agents"),
    ("get", "/api/v1/projects/{project}/agents/{agent}"),
    ("patch", "/api/v1/projects/{project}/agents/{agent}"),
    ("delete", "/api/v1/projects/{project}/agents/{agent}"),
    ("post", "/api/v1/projects/{project}/agents/{agent}/pause"),
    ("post", "/api/v1/projects/{project}/agents/{agent}/resume"),
    ("get", "/api/v1/projects/{project}/agents/{agent}/metrics"),
]


@pytest.mark.parametrize(("method", "path"), ENDPOINTS, ids=[f"{m} {p}" for m, p in ENDPOINTS])
def test_no_token_gets_401(anon_client, agent, method, path):
    url = path.format(
        project=agent.project_id,
        agent=agent.pk,
        agent_type=agent.agent_type_id,
        agent_type_slug=agent.agent_type.slug,
    )

    response = getattr(anon_client, method)(url, {}, format="json")

    assert response.status_code == 401
    assert response.json()["detail"]
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_nothing_changes_without_a_token(anon_client, agent):
    anon_client.delete(f"/api/v1/projects/{agent.project_id}/agents/{agent.pk}")
    anon_client.delete(f"/api/v1/projects/{agent.project_id}")

    assert Project.objects.filter(pk=agent.project_id).exists()
    agent.refresh_from_db()
    assert agent.status == "idle"


def test_invalid_token_gets_401_on_list(jwt_client, db):
    response = jwt_client("not-a-jwt").get("/api/v1/projects")

    assert response.status_code == 401


def test_a_bad_token_gets_the_same_error_envelope_as_every_error(anon_client):
    response = anon_client.get("/api/v1/projects", HTTP_AUTHORIZATION="Bearer not.a.token")

    assert response.status_code == 401
    assert list(response.json()) == ["detail"]
    assert "token" in response.json()["detail"].lower()
