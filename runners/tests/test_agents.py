import uuid

import pytest

from runners.models import AgentInstance


def agents_url(project):
    return f"/api/v1/projects/{project.pk}/agents"


def spawn(client, project, agent_type, name="Ada", **extra):
    payload = {"agent_type_id": str(agent_type.pk), "project_id": str(project.pk), "name": name}
    return client.post(agents_url(project), {**payload, **extra}, format="json")


def test_spawn_returns_201_idle_agent(jwt_client, user, project, agent_type):
    response = spawn(jwt_client(user), project, agent_type)

    assert response.status_code == 201
    body = response.json()
    assert body["status"] == "idle"
    assert body["name"] == "Ada"
    assert body["project_id"] == str(project.pk)
    assert body["agent_type_id"] == str(agent_type.pk)
    assert uuid.UUID(body["id"])


def test_spawned_agent_is_stored_in_the_project(user_client, user, project, agent_type):
    agent_id = spawn(user_client, project, agent_type).json()["id"]

    agent = AgentInstance.objects.get(pk=agent_id)
    assert agent.project == project
    assert agent.created_by == user


def test_spawn_without_project_id_in_body_uses_the_url(user_client, project, agent_type):
    response = user_client.post(
        agents_url(project), {"agent_type_id": str(agent_type.pk), "name": "Ada"}, format="json"
    )

    assert response.status_code == 201
    assert response.json()["project_id"] == str(project.pk)


def test_spawn_with_mismatched_project_id_gets_422(user_client, user, project, agent_type, make_project):
    other = make_project(user)

    response = spawn(user_client, project, agent_type, project_id=str(other.pk))

    assert response.status_code == 422
    assert "project_id" in response.json()["errors"]
    assert not AgentInstance.objects.exists()


def test_spawn_from_deactivated_type_gets_422_saying_inactive(user_client, project, agent_type):
    agent_type.is_active = False
    agent_type.save()

    response = spawn(user_client, project, agent_type)

    assert response.status_code == 422
    assert "inactive" in response.json()["detail"]
    assert "agent_type_id" in response.json()["errors"]
    assert not AgentInstance.objects.exists()


def test_spawn_from_unknown_type_gets_422(user_client, project):
    response = user_client.post(
        agents_url(project), {"agent_type_id": str(uuid.uuid4()), "name": "Ada"}, format="json"
    )

    assert response.status_code == 422
    assert "agent_type_id" in response.json()["errors"]


def test_spawn_with_malformed_type_id_gets_400_naming_it(user_client, project):
    response = user_client.post(
        agents_url(project), {"agent_type_id": "nope", "name": "Ada"}, format="json"
    )

    assert response.status_code == 400
    assert "agent_type_id" in response.json()["errors"]


@pytest.mark.parametrize("field", ["agent_type_id", "name"])
def test_spawn_without_required_field_gets_400_naming_it(user_client, project, agent_type, field):
    payload = {"agent_type_id": str(agent_type.pk), "name": "Ada"}
    del payload[field]

    response = user_client.post(agents_url(project), payload, format="json")

    assert response.status_code == 400
    assert field in response.json()["errors"]


def test_spawn_with_oversize_name_gets_400_naming_name(user_client, project, agent_type):
    response = spawn(user_client, project, agent_type, name="x" * 10_000)

    assert response.status_code == 400
    assert "name" in response.json()["errors"]


def test_spawn_with_bad_json_gets_400(user_client, project):
    response = user_client.post(agents_url(project), "{", content_type="application/json")

    assert response.status_code == 400


def test_list_three_spawned_agents_has_total_3(user_client, project, agent_type):
    for name in ["Ada", "Grace", "Linus"]:
        spawn(user_client, project, agent_type, name=name)

    body = user_client.get(agents_url(project)).json()

    assert body["pagination"]["total"] == 3
    assert [a["name"] for a in body["data"]] == ["Ada", "Grace", "Linus"]
    assert set(body) == {"data", "pagination"}


def test_list_shows_only_this_projects_agents(user_client, user, project, agent_type, make_project, make_agent):
    make_agent(project, agent_type, name="Here")
    make_agent(make_project(user), agent_type, name="Elsewhere")

    body = user_client.get(agents_url(project)).json()

    assert [a["name"] for a in body["data"]] == ["Here"]


def test_list_filters_by_status(user_client, project, agent_type, make_agent):
    make_agent(project, agent_type, name="Busy", status="paused")
    make_agent(project, agent_type, name="Free")

    body = user_client.get(agents_url(project), {"status": "paused"}).json()

    assert [a["name"] for a in body["data"]] == ["Busy"]


def test_list_pages(user_client, project, agent_type, make_agent):
    for i in range(3):
        make_agent(project, agent_type, name=f"A{i}")

    body = user_client.get(agents_url(project), {"page_size": 2, "page": 2}).json()

    assert [a["name"] for a in body["data"]] == ["A2"]
    assert body["pagination"]["has_prev"] is True
    assert body["pagination"]["has_next"] is False


def test_get_agent(user_client, agent):
    response = user_client.get(f"{agents_url(agent.project)}/{agent.pk}")

    assert response.status_code == 200
    body = response.json()
    assert body["id"] == str(agent.pk)
    assert body["status"] == "idle"
    assert body["agent_type_slug"] == "reviewer"


def test_patch_renames_agent(user_client, agent):
    response = user_client.patch(
        f"{agents_url(agent.project)}/{agent.pk}", {"name": "Ada II"}, format="json"
    )

    assert response.status_code == 200
    agent.refresh_from_db()
    assert agent.name == "Ada II"


def test_patch_cannot_change_status(user_client, agent):
    user_client.patch(
        f"{agents_url(agent.project)}/{agent.pk}", {"status": "terminated"}, format="json"
    )

    agent.refresh_from_db()
    assert agent.status == "idle"


def test_patch_with_oversize_name_gets_400_naming_name(user_client, agent):
    response = user_client.patch(
        f"{agents_url(agent.project)}/{agent.pk}", {"name": "x" * 10_000}, format="json"
    )

    assert response.status_code == 400
    assert "name" in response.json()["errors"]


def test_unknown_agent_gets_404(user_client, project):
    assert user_client.get(f"{agents_url(project)}/{uuid.uuid4()}").status_code == 404


def test_agent_under_the_wrong_project_gets_404(user_client, user, agent, make_project):
    other = make_project(user)

    assert user_client.get(f"{agents_url(other)}/{agent.pk}").status_code == 404


def test_a_type_id_that_is_no_id_is_refused_saying_how_to_find_one(user_client, project):
    response = user_client.post(agents_url(project), {"agent_type_id": "null", "name": "Ada"},
                                format="json")

    assert response.status_code == 400
    (message,) = response.json()["errors"]["agent_type_id"]
    assert message.startswith("'null' is not an agent type's id") and "/agent-types" in message
