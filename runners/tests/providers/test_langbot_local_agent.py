"""A runner shaped like LangBot's LocalAgent, configured as LangBot configures it, over the real
SDK runtime: the agent type's models fill its `model-fallback-selector` as model ids (the
first fails, the next answers), its persona its `prompt-editor`, the model sees both sides of
the conversation, and nothing of LangHost's bookkeeping or the user's e-mail."""

import json

import pytest
from asgiref.sync import sync_to_async

from ledger.models import AgentRun
from ledger.services import conversations
from runners.conversations import services as door
from runners.conversations.callers import Caller
from runners.conversations.input import Part
from runners.models import AgentInstance
from runners.tests.conversation_fixtures import read_body
from tests.fake_providers import Reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

LOCAL_AGENT = "plugin:e2e/agent-runner-llm/local-agent"
PERSONA = "You are Ada. Answer in one line."


@pytest.fixture
def models(make_model, openai_server):
    return {name: make_model(openai_server, name) for name in ("broken-chat", "good-chat")}


async def post(client, url, body):
    response = await sync_to_async(client.post)(url, body, format="json")
    return response, json.loads(read_body(response) or b"null")


async def agent_of_type(superuser_client, user_client, project, **type_fields):
    """An agent type made over REST, and an agent of it spawned over REST."""
    created, agent_type = await post(superuser_client, "/api/v1/agent-types", {
        "name": "Ada", "slug": "ada", "runner_id": LOCAL_AGENT, **type_fields})
    assert created.status_code == 201, agent_type
    spawned, agent = await post(user_client, f"/api/v1/projects/{project.pk}/agents",
                                {"agent_type_id": agent_type["id"], "name": "Ada"})
    assert spawned.status_code == 201, agent
    return agent_type, agent["id"]


async def talk(user, agent_id, texts) -> list[dict]:
    """The messages, one after the other, in one new conversation, through the door the
    messages endpoint uses (on this loop: the runtime's host actions need it free)."""
    conversation = await sync_to_async(conversations.create)(
        project_id=str((await AgentInstance.objects.aget(pk=agent_id)).project_id),
        agent_id=agent_id, user_id=str(user.pk))
    answers = []
    for text in texts:
        prepared = await sync_to_async(door.prepare_agent_run)(
            Caller(user), agent_id=agent_id, conversation_id=conversation.client_id,
            parts=[Part(text=text)])
        answers.append(await door.run_to_end(prepared))
    return answers


def reply(outcome: dict) -> str:
    return next(m["data"]["message"]["content"] for m in outcome["messages"]
                if m["type"] == "message.completed")


async def test_configured_as_langbot_configures_it_it_falls_back_keeps_persona_and_history(
        llm_plugin_gateway, models, openai_server, superuser_client, user_client, user,
        project):
    agent_type, agent = await agent_of_type(
        superuser_client, user_client, project, primary_model="broken-chat",
        fallback_models=["good-chat"], personality_prompt=PERSONA)
    openai_server.script(Reply(status=500, error="broken-chat is down"),
                         Reply(text="Nice to meet you, Grace."),
                         Reply(status=500, error="broken-chat is down"),
                         Reply(text="Your name is Grace."))

    first, second = await talk(user, agent, ["My name is Grace.", "What is my name?"])

    assert first["status"] == "completed", first
    assert reply(second) == "Your name is Grace."
    asked = openai_server.calls()[-1].body["messages"]
    assert asked[0] == {"role": "system", "content": PERSONA}
    assert {"role": "user", "content": "My name is Grace."} in asked  # turn 1, as written
    assert asked[-1] == {"role": "user", "content": "What is my name?"}
    every_request = json.dumps([call.body for call in openai_server.calls()])
    assert user.email not in every_request
    assert "invocation" not in every_request and "Current event data" not in every_request
    assert [call.body["model"] for call in openai_server.calls()] == [
        "broken-chat-upstream", "good-chat-upstream"] * 2


async def test_an_explicit_langbot_shaped_config_runs_and_a_foreign_key_is_refused(
        llm_plugin_gateway, models, openai_server, superuser_client, user_client, user,
        project):
    prompt = [{"role": "system", "content": "You answer in French."}]
    good = str(models["good-chat"].pk)
    _, agent = await agent_of_type(superuser_client, user_client, project, runner_config={
        "model": {"primary": good, "fallbacks": []}, "prompt": prompt})
    openai_server.script(Reply(text="Bonjour."))

    (answer,) = await talk(user, agent, ["Hello"])

    assert reply(answer) == "Bonjour."
    assert openai_server.calls()[-1].body["messages"][0] == prompt[0]
    refused, body = await post(superuser_client, "/api/v1/agent-types", {
        "name": "Bad", "slug": "bad", "runner_id": LOCAL_AGENT,
        "runner_config": {"model": {"primary": good}, "temperature-ish": 3}})
    assert refused.status_code == 400
    assert "temperature-ish" in body["errors"]["runner_config"]
    shaped, body = await post(superuser_client, "/api/v1/agent-types", {
        "name": "Bad", "slug": "bad", "runner_id": LOCAL_AGENT,
        "runner_config": {"context-history-fetch-limit": "many"}})
    assert shaped.status_code == 400
    assert "integer" in json.dumps(body["errors"]["runner_config"])


async def test_a_rerank_model_its_config_names_is_granted_for_rerank_by_id(
        llm_plugin_gateway, models, make_model, openai_server, superuser_client, user_client,
        user, project):
    reranker = await sync_to_async(make_model)(openai_server, "a-rerank-model",
                                               model_type="rerank")
    agent_type, agent = await agent_of_type(
        superuser_client, user_client, project, primary_model="good-chat",
        runner_config={"rerank-model": "a-rerank-model"})
    openai_server.script(Reply(text="Fine."))

    (answer,) = await talk(user, agent, ["Hello"])

    assert agent_type["warnings"] == []
    assert answer["status"] == "completed"
    run = await AgentRun.objects.aget(run_id=answer["run_id"])
    granted = {grant["model_id"]: grant["operations"]
               for grant in (await sync_to_async(run.authorization)())["resources"]["models"]}
    assert granted[str(reranker.pk)] == ["rerank"]
