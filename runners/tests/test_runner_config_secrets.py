"""A runner's secret config fields (LangBot's `secret` type, e.g. Dify's API key) are
write-only: stored encrypted, never shown by the API, the admin or to other users, kept when
a write leaves them out, and handed in clear only to the runner."""

import json

import pytest

from runners.admin.catalogue import AgentTypeForm
from runners.catalogue.bindings import agent_runner_config, resolve
from runners.models import AgentType, Binding, RunnerDescriptor

DIFY = "plugin:langbot-team/DifyAgent/default"
KEY = "app-dify-secret-key-4c1e"
SCHEMA = [{"name": "base-url", "type": "string", "required": True},
          {"name": "api-key", "type": "secret", "required": True}]


@pytest.fixture
def dify(db):
    return RunnerDescriptor.objects.create(
        id=DIFY, source=RunnerDescriptor.Source.PLUGIN, runner_name="default",
        plugin_author="langbot-team", plugin_name="DifyAgent", config_schema=SCHEMA).pk


@pytest.fixture
def dify_type(superuser_client, dify):
    created = superuser_client.post("/api/v1/agent-types", {
        "name": "Dify", "slug": "dify", "runner_id": DIFY,
        "runner_config": {"base-url": "http://127.0.0.1:1/v1", "api-key": KEY}}, format="json")
    assert created.status_code == 201, created.json()
    return created


def test_a_secret_is_stored_encrypted_and_never_shown(dify_type, user_client):
    body = dify_type.json()

    assert KEY not in json.dumps(body)
    assert body["runner_config"] == {"base-url": "http://127.0.0.1:1/v1"}
    assert body["runner_config_secrets"] == ["api-key"]
    assert KEY not in json.dumps(AgentType.objects.get(pk=body["id"]).runner_config)
    assert KEY not in user_client.get("/api/v1/agent-types").content.decode()


def test_a_write_that_leaves_the_secret_out_keeps_it_and_null_clears_it(dify_type,
                                                                        superuser_client):
    url = f"/api/v1/agent-types/{dify_type.json()['id']}"
    kept = superuser_client.patch(url, {"runner_config": {"base-url": "http://127.0.0.1:2/v1"}},
                                  format="json")
    agent_type = AgentType.objects.get(pk=dify_type.json()["id"])

    assert kept.json()["runner_config_secrets"] == ["api-key"]
    assert agent_runner_config(agent_type)["api-key"] == KEY  # in clear for the runner only

    cleared = superuser_client.patch(url, {"runner_config": {
        "base-url": "http://127.0.0.1:2/v1", "api-key": None}}, format="json")
    assert cleared.json()["runner_config_secrets"] == []


def test_the_admin_form_shows_no_secret_and_keeps_it_on_save(dify_type):
    agent_type = AgentType.objects.get(pk=dify_type.json()["id"])
    form = AgentTypeForm(instance=agent_type)

    assert KEY not in str(form["runner_config"].value())
    assert "api-key" in form.fields["runner_config"].help_text
    data = {"name": "Dify", "slug": "dify", "runner_id": DIFY, "kind": "llm",
            "runner_config": json.dumps({"base-url": "http://127.0.0.1:3/v1"}),
            "expertise": "[]", "model_params": "{}",
            "is_active": "on"}
    saved = AgentTypeForm(instance=agent_type, data=data)
    assert saved.is_valid(), saved.errors
    saved.save()
    assert agent_runner_config(AgentType.objects.get(pk=agent_type.pk))["api-key"] == KEY


def test_a_bindings_secret_is_write_only_in_the_admin_and_in_clear_for_the_runner(
        dify, admin_browser, agent):
    add = admin_browser.post("/admin/runners/binding/add/", {
        "binding_id": "dify-for-ada", "enabled": "on", "runner_id": DIFY, "scope_type": "agent",
        "scope_id": str(agent.pk), "state_policy": "{}", "delivery_policy": "{}",
        "resource_policy": "{}",
        "runner_config": json.dumps({"base-url": "http://127.0.0.1:1/v1", "api-key": KEY})})
    assert add.status_code == 302, add.content.decode()[:3000]
    binding = Binding.objects.get(binding_id="dify-for-ada")

    page = admin_browser.get(f"/admin/runners/binding/{binding.pk}/change/").content.decode()
    resolved = resolve(agent=agent)

    assert KEY not in json.dumps(binding.runner_config) and KEY not in page
    assert "Secrets set" in page and "api-key" in page
    assert resolved.runner_config["api-key"] == KEY
