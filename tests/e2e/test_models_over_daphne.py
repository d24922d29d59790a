"""An agent that thinks, over real daphne: a provider and two models added through the API, a
type whose primary model fails upstream, a streamed reply from its fallback, usage and cost."""

import json
from decimal import Decimal

import pytest

from tests.fake_providers import FakeProvider, Reply

pytestmark = pytest.mark.e2e

SECRET = "sk-e2e-never-shown-93kd"
PERSONA = "You are Penny, a patient accountant."


@pytest.fixture
def provider_server():
    server = FakeProvider("openai").start()
    yield server
    server.stop()


def bearer(http, credentials) -> dict:
    token = http.post("/api/v1/auth/login", json=credentials).json()["access_token"]
    return {"Authorization": f"Bearer {token}"}


def created(response) -> dict:
    assert response.status_code == 201, response.text
    return response.json()


def test_an_agent_answers_through_its_fallback_model_with_usage_and_cost(
        http, admin_credentials, provider_server):
    admin = bearer(http, admin_credentials)
    seen = []  # every body LangHost answered, searched for the key at the end

    def call(method, path, **kwargs):
        response = http.request(method, path, headers=admin, **kwargs)
        seen.append(response.text)
        return response

    provider = created(call("POST", "/api/v1/model-providers", json={
        "name": "local", "kind": "openai", "base_url": provider_server.base_url,
        "api_key": SECRET}))
    assert provider["has_api_key"] is True
    prices = {"claude-3-opus": (15, 75), "claude-3-sonnet": (3, 15)}
    for name, (input_price, output_price) in prices.items():
        created(call("POST", "/api/v1/models", json={
            "name": name, "provider_id": provider["id"], "upstream_model": f"{name}-upstream",
            "model_type": "chat", "abilities": ["streaming"], "context_window": 8192,
            "input_price_per_mtok": input_price, "output_price_per_mtok": output_price}))
    agent_type = created(call("POST", "/api/v1/agent-types", json={
        "name": "Penny", "slug": "penny", "personality_prompt": PERSONA,
        "primary_model": "claude-3-opus", "fallback_models": ["claude-3-sonnet"],
        "model_params": {"temperature": 0.2, "max_tokens": 64}}))
    assert agent_type["runner_id"] == "builtin:llm-agent"
    project = created(call("POST", "/api/v1/projects", json={"name": "Books", "slug": "books"}))
    agents = f"/api/v1/projects/{project['id']}/agents"
    agent = created(call("POST", agents, json={"agent_type_id": agent_type["id"],
                                               "project_id": project["id"], "name": "Penny"}))
    conversations = f"{agents}/{agent['id']}/conversations"
    conversation = created(call("POST", conversations, json={}))
    provider_server.script(Reply(status=500),
                           Reply(text="Your books balance.", input_tokens=30, output_tokens=6))

    response = call("POST", f"{conversations}/{conversation['id']}/messages?stream=1",
                    json={"text": "Do my books balance?"})

    assert response.status_code == 201
    frames = [json.loads(line) for line in response.text.splitlines()]
    deltas = [f["data"]["chunk"]["content"] for f in frames if f["type"] == "message.delta"]
    # Streamed: deltas before the completed message (those that came together, as one).
    assert deltas and "".join(deltas) == "Your books balance."
    finished = frames[-1]
    assert (finished["type"], finished["status"]) == ("run.finished", "completed")
    assert finished["reply"]["content"] == "Your books balance."
    failed, answered = (request.body for request in provider_server.calls())
    assert (failed["model"], answered["model"]) == ("claude-3-opus-upstream",
                                                    "claude-3-sonnet-upstream")
    assert answered["messages"][0]["role"] == "system"
    assert PERSONA in answered["messages"][0]["content"]
    assert (answered["temperature"], answered["max_tokens"]) == (0.2, 64)
    assert provider_server.calls()[-1].headers["authorization"] == f"Bearer {SECRET}"

    run = call("GET", f"/api/v1/runs/{finished['run_id']}").json()
    assert run["usage"]["total_tokens"] == 36
    metrics = call("GET", f"{agents}/{agent['id']}/metrics").json()
    assert metrics["total_tokens_used"] == 36
    expected_cost = (Decimal(30) * 3 + Decimal(6) * 15) / 1_000_000
    assert Decimal(str(metrics["total_cost_incurred"])) == expected_cost
    call("GET", "/api/v1/model-providers")
    assert not any(SECRET in text for text in seen)
