"""One rule for every door: an agent type made in the admin gets the runner the API would give
it, its models are picked from the registered ones, and a name nobody registered is refused."""

import json

import pytest

from ledger.models import Transcript
from runners.models import DEFAULT_RUNNER_ID, LLM_AGENT_RUNNER_ID, AgentType
from runners.tests.conversation_fixtures import conversations_url, read_body
from tests.fake_providers import Reply

pytestmark = pytest.mark.django_db(transaction=True)

ADD = "/admin/runners/agenttype/add/"


def type_form(**fields):
    """The admin's add form as a browser posts it, runner left to the catalogue's rule."""
    return {"name": "Studio", "slug": "studio", "description": "", "expertise": "[]",
            "personality_prompt": "Answer in one line.", "primary_model": "",
            "model_params": "{}", "tools_requiring_approval": "[]", "runner_id": "",
            "runner_config": "{}", "kind": "llm", "multitask_strategy": "", "is_active": "on",
            "save_input_blobs_as_artifacts": "on",
            "sub_agent_links-TOTAL_FORMS": "0", "sub_agent_links-INITIAL_FORMS": "0",
            "sub_agent_links-MIN_NUM_FORMS": "0", "sub_agent_links-MAX_NUM_FORMS": "1000",
            **fields}


def test_a_type_made_in_the_admin_with_a_picked_model_answers_through_the_llm_agent(
        admin_browser, user_client, make_model, make_agent, project, openai_server):
    make_model(openai_server, "studio-model")
    page = admin_browser.get(ADD).content.decode()
    assert '<option value="studio-model">studio-model' in page  # a choice, not a text box

    response = admin_browser.post(ADD, type_form(primary_model="studio-model"))

    assert response.status_code == 302, response.content.decode()[-3000:]
    agent_type = AgentType.objects.get(slug="studio")
    assert agent_type.runner_id == LLM_AGENT_RUNNER_ID
    openai_server.script(Reply(text="Hello from the studio."))
    agent = make_agent(project, agent_type)
    conversation = user_client.post(conversations_url(agent), {}, format="json").json()["id"]
    reply = json.loads(read_body(user_client.post(
        f"{conversations_url(agent)}/{conversation}/messages", {"text": "Hi"}, format="json")))
    assert reply["reply"]["content"] == "Hello from the studio."
    assert Transcript.objects.filter(conversation_id=conversation, role="assistant").exists()


def test_a_model_name_nobody_registered_is_refused_by_the_admin_form(admin_browser):
    response = admin_browser.post(ADD, type_form(primary_model="gpt-typo"))

    assert response.status_code == 200
    assert "&#x27;gpt-typo&#x27; is not a registered model" in response.content.decode()
    assert not AgentType.objects.filter(slug="studio").exists()


def test_a_type_without_a_model_echoes_from_either_door(admin_browser, superuser_client):
    assert admin_browser.post(ADD, type_form()).status_code == 302
    made_by_api = superuser_client.post("/api/v1/agent-types", {"name": "Plain", "slug": "plain"},
                                   format="json").json()

    assert AgentType.objects.get(slug="studio").runner_id == DEFAULT_RUNNER_ID
    assert made_by_api["runner_id"] == DEFAULT_RUNNER_ID


def test_fallback_models_keep_the_order_they_were_picked_in(admin_browser, make_model,
                                                            openai_server):
    for name in ("primary", "first-fallback", "second-fallback"):
        make_model(openai_server, name)

    response = admin_browser.post(ADD, type_form(
        primary_model="primary", fallback_models_0="second-fallback",
        fallback_models_1="first-fallback"))

    assert response.status_code == 302
    assert AgentType.objects.get(slug="studio").fallback_models == [
        "second-fallback", "first-fallback"]


def test_a_model_removed_since_stays_on_the_page_flagged_and_is_kept_on_save(
        admin_browser, make_agent_type):
    agent_type = make_agent_type(primary_model="retired-model", runner_id=LLM_AGENT_RUNNER_ID)
    change = f"/admin/runners/agenttype/{agent_type.pk}/change/"

    assert "retired-model (not registered)" in admin_browser.get(change).content.decode()
    response = admin_browser.post(change, type_form(
        name=agent_type.name, slug=agent_type.slug, primary_model="retired-model",
        runner_id=LLM_AGENT_RUNNER_ID))

    assert response.status_code == 302
    agent_type.refresh_from_db()
    assert agent_type.primary_model == "retired-model"
