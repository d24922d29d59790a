"""Agent type input errors are 400s that name the field, never 500s."""

import pytest

from runners.models import AgentType

URL = "/api/v1/agent-types"


def post(client, **fields):
    return client.post(URL, {"name": "Reviewer", "slug": "reviewer", **fields}, format="json")


def test_bad_json_gets_400(superuser_client):
    response = superuser_client.post(URL, '{"name": "x",', content_type="application/json")

    assert response.status_code == 400
    assert "JSON" in response.json()["detail"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("expertise", "python"),
        ("expertise", [{"not": "a string"}]),
        ("fallback_models", "gpt-4o"),
        ("model_params", ["temperature", 0.2]),
        ("mcp_servers", {"name": "github"}),
        ("is_active", "maybe"),
        ("name", {"first": "x"}),
        ("slug", "not a slug"),
    ],
)
def test_wrong_type_gets_400_naming_field(superuser_client, field, value):
    response = post(superuser_client, **{field: value})

    assert response.status_code == 400
    assert field in response.json()["errors"]
    assert field in response.json()["detail"]
    assert not AgentType.objects.exists()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("name", "x" * 10_000),
        ("slug", "x" * 10_000),
        ("description", "x" * 10_001),
        ("primary_model", "x" * 10_000),
        ("runner_id", "x" * 10_000),
        ("personality_prompt", "x" * 50_001),
        ("expertise", ["x" * 10_000]),
        ("expertise", ["x"] * 101),
        ("fallback_models", ["m"] * 21),
        ("model_params", {"system": "x" * 100_000}),
        ("mcp_servers", [{"name": "x" * 100_000}]),
    ],
)
def test_oversize_value_gets_400_naming_field(superuser_client, field, value):
    response = post(superuser_client, **{field: value})

    assert response.status_code == 400
    assert field in response.json()["errors"]


@pytest.mark.parametrize("field", ["name", "slug"])
def test_missing_required_field_gets_400_naming_it(superuser_client, field):
    payload = {"name": "Reviewer", "slug": "reviewer"}
    del payload[field]

    response = superuser_client.post(URL, payload, format="json")

    assert response.status_code == 400
    assert field in response.json()["errors"]


def test_duplicate_slug_gets_400_naming_slug(superuser_client, agent_type):
    response = post(superuser_client, slug=agent_type.slug)

    assert response.status_code == 400
    assert "slug" in response.json()["errors"]


def test_patch_with_wrong_type_leaves_agent_type_unchanged(superuser_client, agent_type):
    response = superuser_client.patch(
        f"{URL}/{agent_type.pk}", {"expertise": "rust"}, format="json"
    )

    assert response.status_code == 400
    agent_type.refresh_from_db()
    assert agent_type.expertise == ["python"]
