"""The agent admin: the instance actions obey the API's rules, and an agent type's runner config
is checked against what its runner declares."""

import json

import pytest
from django.contrib.messages import WARNING, get_messages
from django.urls import reverse

from runners.admin.catalogue import AgentTypeForm
from runners.catalogue import runner_config
from runners.models import RunnerDescriptor

CHANGELIST = reverse("admin:runners_agentinstance_changelist")


@pytest.fixture
def admin_browser(client, superuser):
    client.force_login(superuser)
    return client


def run_action(browser, action, *agents):
    return browser.post(
        CHANGELIST,
        {"action": action, "_selected_action": [str(a.pk) for a in agents]},
        follow=True,
    )


def test_pause_action_pauses_idle_agent(admin_browser, agent):
    response = run_action(admin_browser, "pause", agent)

    assert response.status_code == 200
    agent.refresh_from_db()
    assert agent.status == "paused"


def test_an_actions_message_shows_on_the_page_after_it(admin_browser, agent):
    response = run_action(admin_browser, "pause", agent)

    assert "Paused 1 agent(s)." in response.content.decode()


def test_resume_action_resumes_paused_agent(admin_browser, make_agent, project, agent_type):
    agent = make_agent(project, agent_type, status="paused")

    run_action(admin_browser, "resume", agent)

    agent.refresh_from_db()
    assert agent.status == "idle"


def test_terminate_action_terminates_and_keeps_row(admin_browser, agent):
    run_action(admin_browser, "terminate", agent)

    agent.refresh_from_db()
    assert agent.status == "terminated"


def test_resume_action_leaves_terminated_agent_terminated_with_warning(
    admin_browser, make_agent, project, agent_type
):
    agent = make_agent(project, agent_type, name="Zombie", status="terminated")

    response = run_action(admin_browser, "resume", agent)

    agent.refresh_from_db()
    assert agent.status == "terminated"
    warnings = [m.message for m in get_messages(response.wsgi_request) if m.level == WARNING]
    assert warnings
    assert "Zombie" in warnings[0]
    assert "terminated" in warnings[0]


def test_action_moves_allowed_agents_and_warns_about_the_rest(
    admin_browser, make_agent, project, agent_type
):
    idle = make_agent(project, agent_type, status="idle")
    paused = make_agent(project, agent_type, status="paused")

    response = run_action(admin_browser, "pause", idle, paused)

    idle.refresh_from_db()
    paused.refresh_from_db()
    assert idle.status == "paused"
    assert paused.status == "paused"
    levels = [m.level for m in get_messages(response.wsgi_request)]
    assert WARNING in levels


def test_agent_instance_change_page_loads(admin_browser, agent):
    response = admin_browser.get(reverse("admin:runners_agentinstance_change", args=[agent.pk]))

    assert response.status_code == 200


def test_status_is_read_only_in_the_admin_form(admin_browser, agent):
    response = admin_browser.get(reverse("admin:runners_agentinstance_change", args=[agent.pk]))

    assert 'name="status"' not in response.content.decode()


# --- a runner's own config ---------------------------------------------------------------------

SCHEMA = [{"name": "model", "type": "model-fallback-selector", "required": True},
          {"name": "prompt", "type": "prompt-editor",
           "default": [{"role": "system", "content": "Be brief."}]}]


@pytest.fixture
def langbot_shaped_runner(db):
    return RunnerDescriptor.objects.create(
        id="plugin:e2e/agent/local", source=RunnerDescriptor.Source.PLUGIN, runner_name="local",
        plugin_author="e2e", plugin_name="agent", config_schema=SCHEMA).pk


def type_form(runner_id: str, config: dict, instance=None) -> AgentTypeForm:
    return AgentTypeForm(instance=instance, data={
        "name": "Local", "slug": "local", "runner_id": runner_id, "kind": "llm",
        "runner_config": json.dumps(config), "expertise": "[]",
        "model_params": "{}", "knowledge_retrieval": "tool", "is_active": "on"})


def test_the_admin_form_refuses_a_config_field_the_runner_does_not_declare(
        langbot_shaped_runner):
    form = type_form(langbot_shaped_runner, {"prompt": [{"role": "system", "content": "Hi"}],
                                             "bogus": 1})

    assert not form.is_valid()
    (error,) = form.errors["runner_config"]
    assert error.startswith("bogus: ") and "model, prompt" in error


def test_the_admin_form_takes_a_langbot_shaped_config_and_shows_the_runners_fields(
        langbot_shaped_runner, make_agent_type):
    form = type_form(langbot_shaped_runner, {"model": {"primary": "m-1", "fallbacks": []}})
    assert form.is_valid(), form.errors
    saved = form.save()

    help_text = AgentTypeForm(instance=saved).fields["runner_config"].help_text
    assert "model (model-fallback-selector, required)" in help_text
    assert "prompt (prompt-editor, default" in help_text


# --- a runner's config, field by field ----------------------------------------------------

FORMED_SCHEMA = [
    {"name": "base-url", "type": "string", "label": {"en_US": "Base URL"}},
    {"name": "api-key", "type": "secret", "label": {"en_US": "API key"}},
    {"name": "mode", "type": "select", "options": [{"name": "chat"}, {"name": "workflow"}],
     "default": "chat"},
    {"name": "max-rounds", "type": "integer", "default": 3},
    {"name": "prompt", "type": "prompt-editor"},
]


def change_form(agent_type, **fields):
    return {"name": agent_type.name, "slug": agent_type.slug, "expertise": "[]",
            "model_params": "{}", "tools_requiring_approval": "[]",
            "runner_id": agent_type.runner_id, "runner_config": "{}", "kind": "llm",
            "is_active": "on", "sub_agent_links-TOTAL_FORMS": "0",
            "sub_agent_links-INITIAL_FORMS": "0", **fields}


def test_a_runners_simple_config_fields_are_form_fields_and_its_secret_stays_write_only(
        admin_browser, make_agent_type):
    RunnerDescriptor.objects.create(
        id="plugin:e2e/formed/runner", source=RunnerDescriptor.Source.PLUGIN,
        runner_name="runner", plugin_author="e2e", plugin_name="formed",
        config_schema=FORMED_SCHEMA)
    agent_type = make_agent_type(runner_id="plugin:e2e/formed/runner")
    url = reverse("admin:runners_agenttype_change", args=[agent_type.pk])

    page = admin_browser.get(url).content.decode()
    response = admin_browser.post(url, change_form(
        agent_type, **{"runner_config__base-url": "http://127.0.0.1:9/v1",
                       "runner_config__api-key": "sk-formed-secret",
                       "runner_config__mode": "workflow", "runner_config__max-rounds": "5"}))

    for name in ("base-url", "api-key", "mode", "max-rounds"):
        assert f'name="runner_config__{name}"' in page
    assert 'name="runner_config__prompt"' not in page  # the persona fills it
    assert response.status_code == 302, response.content.decode()[-2000:]
    agent_type.refresh_from_db()
    stored = agent_type.runner_config
    assert {key: stored[key] for key in ("base-url", "mode", "max-rounds")} == {
        "base-url": "http://127.0.0.1:9/v1", "mode": "workflow", "max-rounds": 5}
    assert "sk-formed-secret" not in json.dumps(stored)  # sealed
    assert "sk-formed-secret" not in admin_browser.get(url).content.decode()

    admin_browser.post(url, change_form(agent_type, **{"runner_config__mode": "chat"}))
    agent_type.refresh_from_db()
    assert agent_type.runner_config["mode"] == "chat"
    assert "base-url" not in agent_type.runner_config  # left blank: the runner's default
    assert runner_config.secrets_set(agent_type.runner_config) == ["api-key"]  # kept


def test_a_staff_member_who_may_only_view_agents_cannot_terminate_them(client, agent,
                                                                        make_staff):
    client.force_login(make_staff("view_agentinstance"))

    run_action(client, "terminate", agent)

    agent.refresh_from_db()
    assert agent.status == "idle"
