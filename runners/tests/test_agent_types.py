import uuid

import pytest

from runners.models import DEFAULT_RUNNER_ID, AgentType, RunnerDescriptor

URL = "/api/v1/agent-types"


def known_runner(runner_id, available=True):
    author, plugin, name = runner_id.removeprefix("plugin:").split("/")
    return RunnerDescriptor.objects.create(id=runner_id, source="plugin", plugin_author=author,
                                           plugin_name=plugin, runner_name=name,
                                           available=available)


@pytest.fixture(autouse=True)
def reviewer_runner(db):
    """The runner FULL names is one LangHost knows (as if the runtime had listed it)."""
    return known_runner("plugin:acme/reviewer/default")

FULL = {
    "name": "Code Reviewer",
    "slug": "code-reviewer",
    "description": "Reviews pull requests.",
    "expertise": ["python", "django"],
    "personality_prompt": "You are meticulous.",
    "primary_model": "gpt-4o",
    "fallback_models": ["gpt-4o-mini", "claude-3-5-haiku"],
    "model_params": {"temperature": 0.2, "max_tokens": 2048},
    "mcp_servers": [{"name": "github", "url": "http://localhost:9000"}],
    "is_active": False,
    "runner_id": "plugin:acme/reviewer/default",
}


def url(agent_type):
    return f"{URL}/{agent_type.pk}"


def test_regular_user_gets_403_creating_agent_type(user_client):
    response = user_client.post(URL, FULL, format="json")

    assert response.status_code == 403
    assert response.json()["detail"]
    assert not AgentType.objects.exists()


def test_superuser_creates_agent_type_echoing_every_field(superuser_client):
    response = superuser_client.post(URL, FULL, format="json")

    assert response.status_code == 201
    body = response.json()
    assert {key: body[key] for key in FULL} == FULL
    assert uuid.UUID(body["id"])
    assert body["created_at"] and body["updated_at"]


def test_new_agent_type_defaults_to_active_with_builtin_runner(superuser_client):
    body = superuser_client.post(URL, {"name": "Plain", "slug": "plain"}, format="json").json()

    assert body["is_active"] is True
    assert body["runner_id"] == DEFAULT_RUNNER_ID
    assert body["expertise"] == []
    assert body["fallback_models"] == []
    assert body["model_params"] == {}
    assert body["mcp_servers"] == []


def test_superuser_creates_agent_type_over_jwt(jwt_client, superuser):
    response = jwt_client(superuser).post(URL, FULL, format="json")

    assert response.status_code == 201


def test_any_user_lists_agent_types(jwt_client, user, agent_type):
    response = jwt_client(user).get(URL)

    assert response.status_code == 200
    body = response.json()
    assert body["pagination"]["total"] >= 1
    assert [t["slug"] for t in body["data"]] == ["reviewer"]


def test_list_envelope_has_exactly_data_and_pagination(user_client, agent_type):
    body = user_client.get(URL).json()

    assert set(body) == {"data", "pagination"}
    assert set(body["pagination"]) == {
        "total", "page", "page_size", "total_pages", "has_next", "has_prev"
    }


def test_page_size_is_capped_at_100(user_client, make_agent_type):
    AgentType.objects.bulk_create(
        AgentType(name=f"T{i:03}", slug=f"t{i:03}") for i in range(101)
    )

    body = user_client.get(URL, {"page_size": 1000}).json()

    assert body["pagination"]["page_size"] == 100
    assert len(body["data"]) == 100
    assert body["pagination"]["total"] == 101
    assert body["pagination"]["total_pages"] == 2
    assert body["pagination"]["has_next"] is True


def test_list_filters_by_is_active(user_client, make_agent_type):
    make_agent_type(slug="on")
    make_agent_type(slug="off", is_active=False)

    body = user_client.get(URL, {"is_active": "false"}).json()

    assert [t["slug"] for t in body["data"]] == ["off"]


def test_list_orders_by_slug_descending(user_client, make_agent_type):
    for slug in ["b", "c", "a"]:
        make_agent_type(slug=slug)

    body = user_client.get(URL, {"ordering": "-slug"}).json()

    assert [t["slug"] for t in body["data"]] == ["c", "b", "a"]


def test_get_agent_type_by_id(user_client, agent_type):
    response = user_client.get(url(agent_type))

    assert response.status_code == 200
    assert response.json()["slug"] == "reviewer"


def test_get_agent_type_by_slug(user_client, agent_type):
    response = user_client.get(f"{URL}/slug/reviewer")

    assert response.status_code == 200
    assert response.json()["id"] == str(agent_type.pk)


def test_unknown_slug_gets_404(user_client, db):
    assert user_client.get(f"{URL}/slug/nope").status_code == 404


def test_unknown_id_gets_404(user_client, db):
    assert user_client.get(f"{URL}/{uuid.uuid4()}").status_code == 404


def test_patch_keeps_unchanged_fields(superuser_client):
    created = superuser_client.post(URL, FULL, format="json").json()

    response = superuser_client.patch(
        f"{URL}/{created['id']}", {"description": "Now stricter."}, format="json"
    )

    assert response.status_code == 200
    body = response.json()
    assert body["description"] == "Now stricter."
    assert {key: body[key] for key in FULL if key != "description"} == {
        key: value for key, value in FULL.items() if key != "description"
    }


def test_patch_persists_the_change(superuser_client, agent_type):
    superuser_client.patch(url(agent_type), {"is_active": False}, format="json")

    agent_type.refresh_from_db()
    assert agent_type.is_active is False
    assert agent_type.expertise == ["python"]


def test_regular_user_gets_403_patching_agent_type(user_client, agent_type):
    response = user_client.patch(url(agent_type), {"name": "Mine"}, format="json")

    assert response.status_code == 403
    agent_type.refresh_from_db()
    assert agent_type.name == "Reviewer"


def test_put_is_not_allowed(superuser_client, agent_type):
    assert superuser_client.put(url(agent_type), FULL, format="json").status_code == 405


def test_superuser_deletes_agent_type(superuser_client, agent_type):
    response = superuser_client.delete(url(agent_type))

    assert response.status_code == 204
    assert not AgentType.objects.filter(pk=agent_type.pk).exists()


def test_regular_user_gets_403_deleting_agent_type(user_client, agent_type):
    assert user_client.delete(url(agent_type)).status_code == 403
    assert AgentType.objects.filter(pk=agent_type.pk).exists()


def test_deleting_agent_type_with_agents_gets_409(superuser_client, agent):
    response = superuser_client.delete(f"{URL}/{agent.agent_type_id}")

    assert response.status_code == 409
    assert "inactive" in response.json()["detail"] or "deactivate" in response.json()["detail"]
    assert AgentType.objects.filter(pk=agent.agent_type_id).exists()


@pytest.mark.parametrize("slash", ["", "/"])
def test_paths_work_with_and_without_trailing_slash(user_client, agent_type, slash):
    assert user_client.get(URL + slash).status_code == 200
    assert user_client.get(url(agent_type) + slash).status_code == 200


def test_an_unknown_runner_is_refused_naming_runner_id(superuser_client):
    response = superuser_client.post(URL, {**FULL, "runner_id": "plugin:acme/nobody/x"},
                                     format="json")

    assert response.status_code == 400
    assert "runner_id" in response.json()["errors"]
    assert not AgentType.objects.exists()


def test_a_known_runner_that_is_down_is_accepted_with_a_warning(superuser_client):
    known_runner("plugin:acme/sleepy/default", available=False)

    response = superuser_client.post(URL, {**FULL, "runner_id": "plugin:acme/sleepy/default"},
                                     format="json")

    assert response.status_code == 201
    assert "not available now" in response.json()["warnings"][0]


def test_an_available_runner_has_no_warning(superuser_client):
    response = superuser_client.post(URL, FULL, format="json")

    assert response.json()["warnings"] == []
