"""The issue-2 flows over real HTTP against daphne."""

import re

import pytest

pytestmark = pytest.mark.e2e

PASSWORD = "Grace-Hopper-1906"


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


def login(http, email, password):
    response = http.post("/api/v1/auth/login", json={"email": email, "password": password})
    assert response.status_code == 200, response.text
    return response.json()


def test_admin_login_page_is_served(http):
    response = http.get("/admin/login/")

    assert response.status_code == 200
    assert "text/html" in response.headers["content-type"]


def test_api_docs_are_served(http):
    assert http.get("/api/docs/").status_code == 200
    assert http.get("/api/schema/").status_code == 200


def test_swagger_ui_and_admin_assets_are_served(http):
    """Without its JS and CSS the docs page is blank: daphne must serve static files."""
    html = http.get("/api/docs/").text
    bundle = re.search(r'src="([^"]*swagger-ui-bundle\.js)"', html).group(1)

    assert http.get(bundle).status_code == 200
    assert http.get("/static/admin/css/base.css").status_code == 200


def test_api_without_token_gets_401(http):
    assert http.get("/api/v1/projects").status_code == 401


def test_register_login_and_agent_lifecycle(http, admin_credentials):
    # A newcomer registers and signs in.
    registered = http.post(
        "/api/v1/auth/register",
        json={"email": "grace@example.com", "password": PASSWORD,
              "first_name": "Grace", "last_name": "Hopper"},
    )
    assert registered.status_code == 202, registered.text
    assert "password" not in registered.json()
    tokens = login(http, "grace@example.com", PASSWORD)
    assert tokens["token_type"] == "bearer"
    grace = bearer(tokens["access_token"])

    refreshed = http.post("/api/v1/auth/refresh", json={"refresh_token": tokens["refresh_token"]})
    assert http.get("/api/v1/auth/me", headers=bearer(refreshed.json()["access_token"])).json()[
        "email"
    ] == "grace@example.com"

    # She creates a project; she may not add to the agent catalogue.
    project = http.post(
        "/api/v1/projects", json={"name": "Apollo", "slug": "apollo"}, headers=grace
    )
    assert project.status_code == 201, project.text
    project_id = project.json()["id"]
    assert http.post(
        "/api/v1/agent-types", json={"name": "X", "slug": "x"}, headers=grace
    ).status_code == 403

    # The admin from LANGHOST_ADMIN_EMAIL / _PASSWORD (ensure_admin) adds an agent type.
    admin = bearer(login(http, **admin_credentials)["access_token"])
    agent_type = http.post(
        "/api/v1/agent-types",
        json={"name": "Reviewer", "slug": "reviewer", "expertise": ["python"]},
        headers=admin,
    )
    assert agent_type.status_code == 201, agent_type.text
    agent_type_id = agent_type.json()["id"]
    listed = http.get("/api/v1/agent-types", headers=grace).json()
    assert listed["pagination"]["total"] >= 1

    # She spawns an agent and walks it through its states.
    agents = f"/api/v1/projects/{project_id}/agents"
    spawned = http.post(
        agents,
        json={"agent_type_id": agent_type_id, "project_id": project_id, "name": "Ada"},
        headers=grace,
    )
    assert spawned.status_code == 201, spawned.text
    assert spawned.json()["status"] == "idle"
    agent = f"{agents}/{spawned.json()['id']}"

    assert http.post(f"{agent}/pause", headers=grace).json()["status"] == "paused"
    assert http.post(f"{agent}/resume", headers=grace).json()["status"] == "idle"
    terminated = http.delete(agent, headers=grace)
    assert terminated.status_code == 200
    assert terminated.json()["message"]
    resumed = http.post(f"{agent}/resume", headers=grace)
    assert resumed.status_code == 422
    assert "terminated" in resumed.json()["detail"]
    assert http.get(agent, headers=grace).json()["status"] == "terminated"

    metrics = http.get(f"{agent}/metrics", headers=grace).json()
    assert metrics["total_instances"] == 1
    assert metrics["total_tasks_completed"] == 0


def test_outsider_gets_404_for_someone_elses_project_over_http(http, admin_credentials):
    admin = bearer(login(http, **admin_credentials)["access_token"])
    project_id = http.post(
        "/api/v1/projects", json={"name": "Secret", "slug": "secret"}, headers=admin
    ).json()["id"]
    http.post("/api/v1/auth/register", json={"email": "eve@example.com", "password": PASSWORD})
    eve = bearer(login(http, "eve@example.com", PASSWORD)["access_token"])

    assert http.get(f"/api/v1/projects/{project_id}", headers=eve).status_code == 404
    assert http.get(f"/api/v1/projects/{project_id}/agents", headers=eve).status_code == 404
