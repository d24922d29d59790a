"""Where people come in: `/`, the API root, the admin's name and sidebar, its pages' links."""

import uuid

import pytest
from django.test import Client

from ledger.models import AgentRun, AgentRunnerState, Conversation, Transcript
from runners.models import AgentInstance, AgentType, RunnerDescriptor

pytestmark = pytest.mark.django_db


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_root_url_leads_to_the_admin(client):
    response = client.get("/", follow=True)

    assert response.redirect_chain[0][0] == "/admin/"
    assert response.status_code == 200


def test_the_api_root_lists_the_entry_points(anon_client):
    body = anon_client.get("/api/v1/").json()

    for name in ("login", "projects", "agent-types", "runs", "runners", "schema", "docs"):
        assert body[name].startswith("http://testserver/api/"), name
    assert body["runs"].endswith("/api/v1/runs")
    assert "{project_id}" in body["per_project"]["agents"]


def test_the_admin_is_branded_and_its_sidebar_has_the_playground_and_runtime(superuser):
    html = signed_in(superuser).get("/admin/ledger/agentrun/").content.decode()

    assert "LangHost administration" in html and "Django administration" not in html
    assert 'href="/admin/playground/"' in html and 'href="/admin/runtime/"' in html


@pytest.fixture
def talk(superuser, make_project):
    project = make_project(superuser, name="Support desk")
    agent_type = AgentType.objects.create(name="Echo", slug="echo", runner_id="builtin:echo")
    agent = AgentInstance.objects.create(name="Ada", project=project, agent_type=agent_type)
    conversation = Conversation.objects.create(
        conversation_id=str(uuid.uuid4()), client_id="c1", title="Billing question",
        project_id=str(project.pk), agent_id=str(agent.pk), user_id=str(superuser.pk))
    run = AgentRun.objects.create(
        run_id=str(uuid.uuid4()), event_id="e1", runner_id="builtin:echo", status="completed",
        agent_id=str(agent.pk), project_id=str(project.pk),
        conversation_id=conversation.conversation_id)
    Transcript.objects.create(conversation_id=conversation.conversation_id, role="user",
                              author="user", content="Why was I charged twice?", event_id="e1")
    Transcript.objects.create(conversation_id=conversation.conversation_id, role="assistant",
                              author="Ada", content="Let me look at that.", run_id=run.run_id)
    AgentRunnerState.objects.create(scope="conversation", scope_key="k", state_key="turns",
                                    value_json=2, conversation_id=conversation.conversation_id,
                                    runner_id="builtin:echo")
    return {"project": project, "agent": agent, "conversation": conversation, "run": run}


def test_the_conversation_page_shows_its_transcript_state_and_runs(superuser, talk):
    html = signed_in(superuser).get(
        f"/admin/ledger/conversation/{talk['conversation'].pk}/change/").content.decode()

    assert "Why was I charged twice?" in html and "Let me look at that." in html
    assert f'href="/admin/runs/{talk["run"].run_id}/"' in html
    assert "turns" in html and 'class="run-status status-completed"' in html
    assert ">Ada</a>" in html and ">Support desk</a>" in html


def test_ledger_lists_name_and_link_agents_and_projects(superuser, talk):
    html = signed_in(superuser).get("/admin/ledger/agentrun/").content.decode()

    assert f'>{talk["agent"].name}</a>' in html and ">Support desk</a>" in html
    assert 'class="run-status status-completed"' in html


def test_an_agents_page_links_to_its_conversations_and_runs(superuser, talk):
    agent = talk["agent"]
    html = signed_in(superuser).get(
        f"/admin/runners/agentinstance/{agent.pk}/change/").content.decode()

    assert f'/admin/ledger/conversation/?agent_id={agent.pk}">1 conversation(s)' in html
    assert f'/admin/ledger/agentrun/?agent_id={agent.pk}">1 run(s)' in html
    runs = signed_in(superuser).get(f"/admin/ledger/agentrun/?agent_id={agent.pk}")
    assert talk["run"].run_id in runs.content.decode()


def test_the_agent_type_form_offers_the_known_runners(superuser):
    RunnerDescriptor.objects.create(id="plugin:acme/sleepy/default", source="plugin",
                                    plugin_author="acme", plugin_name="sleepy",
                                    runner_name="default", available=False)

    html = signed_in(superuser).get("/admin/runners/agenttype/add/").content.decode()

    assert '<select name="runner_id"' in html
    assert "plugin:acme/sleepy/default (not available now)" in html
    assert 'value="builtin:llm-agent"' in html


@pytest.mark.parametrize("changelist", ["agentrun", "transcript", "eventlog", "modelcall"])
def test_ledger_lists_link_each_row_to_its_run(superuser, talk, changelist):
    from ledger.models import EventLog, ModelCall

    run_id = talk["run"].run_id
    EventLog.objects.create(event_id="e1", event_type="message.received", run_id=run_id)
    ModelCall.objects.create(run_id=run_id, model_id="m", model_name="m", status="ok")

    html = signed_in(superuser).get(f"/admin/ledger/{changelist}/").content.decode()

    assert f'<a href="/admin/runs/{run_id}/">{run_id}</a>' in html
