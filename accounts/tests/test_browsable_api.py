def test_browsable_api_works_with_admin_session(client, superuser, password, project):
    client.force_login(superuser)

    response = client.get("/api/v1/projects", HTTP_ACCEPT="text/html")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    assert "Apollo" in response.content.decode()


def test_session_from_admin_login_form_authenticates_api(client, superuser, password):
    client.post("/admin/login/", {"username": superuser.email, "password": password})

    response = client.get("/api/v1/auth/me", HTTP_ACCEPT="application/json")

    assert response.status_code == 200
    assert response.json()["email"] == superuser.email


def test_browsable_api_renders_agent_list(client, superuser, password, agent):
    client.force_login(superuser)

    response = client.get(f"/api/v1/projects/{agent.project_id}/agents", HTTP_ACCEPT="text/html")

    assert response.status_code == 200
    assert "Ada" in response.content.decode()


def test_browsable_api_renders_agent_types(client, superuser, password, agent_type):
    client.force_login(superuser)

    response = client.get("/api/v1/agent-types", HTTP_ACCEPT="text/html")

    assert response.status_code == 200
    assert "reviewer" in response.content.decode()
