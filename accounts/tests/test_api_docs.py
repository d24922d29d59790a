def test_schema_is_served(client, db):
    response = client.get("/api/schema/")

    assert response.status_code == 200
    assert b"/api/v1/agent-types" in response.content


def test_schema_documents_every_endpoint(client, db):
    body = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()

    paths = set(body["paths"])
    for expected in [
        "/api/v1/auth/register",
        "/api/v1/auth/login",
        "/api/v1/auth/refresh",
        "/api/v1/auth/me",
        "/api/v1/projects",
        "/api/v1/projects/{id}",
        "/api/v1/agent-types",
        "/api/v1/agent-types/{id}",
        "/api/v1/agent-types/slug/{slug}",
        "/api/v1/projects/{project_id}/agents",
        "/api/v1/projects/{project_id}/agents/{agent_id}",
        "/api/v1/projects/{project_id}/agents/{agent_id}/pause",
        "/api/v1/projects/{project_id}/agents/{agent_id}/resume",
        "/api/v1/projects/{project_id}/agents/{agent_id}/metrics",
    ]:
        assert expected in paths


def test_swagger_ui_is_served(client, db):
    response = client.get("/api/docs/")

    assert response.status_code == 200
    assert b"swagger" in response.content.lower()
