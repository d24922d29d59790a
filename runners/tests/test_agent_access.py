"""Someone outside a project gets 404 for its agents; members and superusers get through."""

import pytest


def agent_url(agent):
    return f"/api/v1/projects/{agent.project_id}/agents/{agent.pk}"


@pytest.mark.parametrize(
    ("method", "suffix"),
    [
        ("get", ""),
        ("patch", ""),
        ("delete", ""),
        ("post", "/pause"),
        ("post", "/resume"),
        ("get", "/metrics"),
    ],
)
def test_another_user_gets_404_for_the_agent(jwt_client, outsider, agent, method, suffix):
    response = getattr(jwt_client(outsider), method)(agent_url(agent) + suffix, {}, format="json")

    assert response.status_code == 404
    agent.refresh_from_db()
    assert agent.status == "idle"


def test_another_user_gets_404_listing_agents(outsider_client, project):
    assert outsider_client.get(f"/api/v1/projects/{project.pk}/agents").status_code == 404


def test_another_user_cannot_spawn_into_the_project(outsider_client, project, agent_type):
    response = outsider_client.post(
        f"/api/v1/projects/{project.pk}/agents",
        {"agent_type_id": str(agent_type.pk), "name": "Intruder"},
        format="json",
    )

    assert response.status_code == 404
    assert not project.agents.exists()


def test_404_for_hidden_project_matches_unknown_project(outsider_client, project):
    hidden = outsider_client.get(f"/api/v1/projects/{project.pk}/agents")
    unknown = outsider_client.get("/api/v1/projects/00000000-0000-0000-0000-000000000000/agents")

    assert hidden.json() == unknown.json()


def test_member_reads_the_agent(outsider_client, outsider, agent):
    agent.project.members.add(outsider)

    response = outsider_client.get(agent_url(agent))

    assert response.status_code == 200
    assert response.json()["name"] == "Ada"


def test_superuser_reads_any_agent(superuser_client, agent):
    assert superuser_client.get(agent_url(agent)).status_code == 200


def test_superuser_pauses_any_agent(superuser_client, agent):
    assert superuser_client.post(f"{agent_url(agent)}/pause").json()["status"] == "paused"


@pytest.mark.parametrize(("method", "suffix", "body"), [
    ("patch", "", {"name": "Renamed"}),
    ("post", "/pause", {}),
    ("post", "/resume", {}),
    ("delete", "", {}),
])
def test_a_member_uses_the_agent_but_only_the_owner_changes_it(member_client, client_of_owner,
                                                              agent, method, suffix, body):
    refused = getattr(member_client, method)(agent_url(agent) + suffix, body, format="json")
    agent.refresh_from_db()

    assert refused.status_code == 403
    assert (agent.name, agent.status) == ("Ada", "idle")
    assert member_client.get(agent_url(agent)).status_code == 200
    assert member_client.get(agent_url(agent) + "/metrics").status_code == 200
    if suffix != "/resume":  # an idle agent cannot resume, whoever asks
        allowed = getattr(client_of_owner, method)(agent_url(agent) + suffix, body,
                                                   format="json")
        assert allowed.status_code == 200, allowed.content


def test_a_member_cannot_spawn_an_agent_but_the_owner_can(member_client, client_of_owner,
                                                         project, agent_type):
    path, body = f"/api/v1/projects/{project.pk}/agents", {"agent_type_id": str(agent_type.pk),
                                                           "name": "Helper"}

    assert member_client.post(path, body, format="json").status_code == 403
    assert client_of_owner.post(path, body, format="json").status_code == 201


@pytest.fixture
def client_of_owner(user_client):
    """The `project` fixture's owner is `user`."""
    return user_client
