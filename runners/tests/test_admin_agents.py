"""The agent instance admin's pause / resume / terminate actions obey the API's rules."""

import pytest
from django.contrib.messages import WARNING, get_messages
from django.urls import reverse

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
