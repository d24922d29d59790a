"""The built-in LLM agent knows what its knowledge bases hold: it searches them (a tool the
model calls, or a search before it answers), the chat model receives the passage, the reply
cites it, and the run records the search and every embedding and chat call. A base of another
project named by the type is never searched."""

import json

import pytest
from asgiref.sync import async_to_sync
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from accounts.models import Project
from ledger.models import AgentRunEvent, Conversation, ModelCall
from runners.knowledge import services
from runners.knowledge.models import KnowledgeBase
from runners.knowledge.tests.conftest import pdf_with
from runners.models import LLM_AGENT_RUNNER_ID, AgentType, LLMModel
from runners.tests.conversation_fixtures import conversations_url, read_body
from tests.fake_providers import Reply

pytestmark = pytest.mark.django_db(transaction=True)

ANSWER_PAGE = "Divers must register with the harbour master before entering the water."
SEARCH = Reply(text="", tool_calls=[{"id": "call-kb", "name": "search_knowledge",
                                     "arguments": '{"query": "where must divers register"}'}])


def base_with(project, embedding_model, name="Harbour") -> KnowledgeBase:
    knowledge_base = KnowledgeBase.objects.create(project=project, name=name,
                                                  embedding_model=embedding_model)
    for file_name, data in (("rules.pdf", pdf_with("Tide tables are posted daily.", ANSWER_PAGE)),
                            ("ferries.md", b"# Ferries\n\nThe ferry leaves hourly.")):
        document = services.add_document(knowledge_base, SimpleUploadedFile(file_name, data))
        async_to_sync(services.ingest)(document.pk)
    return knowledge_base


@pytest.fixture
def chat_model(embedding_model):
    return LLMModel.objects.create(name="fake-chat", provider=embedding_model.provider,
                                   upstream_model="chat", context_window=8000)


def agent_knowing(make_agent_type, make_agent, project, bases, retrieval="tool"):
    agent_type = make_agent_type(name="Harbour guide", runner_id=LLM_AGENT_RUNNER_ID,
                                 primary_model="fake-chat", knowledge_retrieval=retrieval,
                                 knowledge_bases=[str(base.pk) for base in bases])
    return make_agent(project, agent_type)


def ask(client, agent, text) -> dict:
    conversation = client.post(conversations_url(agent), {}, format="json").json()["id"]
    response = client.post(f"{conversations_url(agent)}/{conversation}/messages",
                           {"text": text}, format="json")
    return json.loads(read_body(response).decode())


def chat_calls(openai_server):
    return [call for call in openai_server.calls() if call.path.endswith("/chat/completions")]


def test_the_agent_searches_its_base_and_cites_the_passage_it_answered_from(
        user_client, admin_browser, make_agent_type, make_agent, project, embedding_model, chat_model,
        openai_server):
    agent = agent_knowing(make_agent_type, make_agent, project,
                          [base_with(project, embedding_model)])
    openai_server.script(SEARCH, Reply(text="With the harbour master [1]."))

    body = ask(user_client, agent, "Where do divers register?")

    assert body["status"] == "completed"
    first, second = chat_calls(openai_server)
    assert "search_knowledge" in {tool["function"]["name"] for tool in first.body["tools"]}
    (tool_message,) = [m for m in second.body["messages"] if m["role"] == "tool"]
    assert tool_message["content"].startswith("[1] rules.pdf, page 2:")
    assert ANSWER_PAGE in tool_message["content"]
    (citation, *_) = body["reply"]["citations"]
    assert (citation["document"], citation["chunk"], citation["page"]) == ("rules.pdf", 1, 2)
    assert 0 < citation["score"] <= 1
    started = AgentRunEvent.objects.get(run_id=body["run_id"], type="tool.call.started")
    assert started.data_json["tool_name"] == "search_knowledge"
    calls = list(ModelCall.objects.filter(run_id=body["run_id"]).values_list(
        "operation", "model_name", "status"))
    assert ("embedding", "fake-embedder", "ok") in calls
    assert calls.count(("stream", "fake-chat", "ok")) == 2
    cited = "rules.pdf, page 2 · chunk 1 · score"
    conversation = Conversation.objects.get(conversation_id=body["conversation_id"])
    for page in (reverse("admin:ledger_conversation_change", args=[conversation.pk]),
                 reverse("admin-run-detail", args=[body["run_id"]])):
        assert cited in admin_browser.get(page, follow=True).content.decode()


def test_an_automatic_search_puts_the_passage_before_the_model_in_one_call(
        user_client, make_agent_type, make_agent, project, embedding_model, chat_model,
        openai_server):
    agent = agent_knowing(make_agent_type, make_agent, project,
                          [base_with(project, embedding_model)], retrieval="auto")
    openai_server.script(Reply(text="With the harbour master [1]."))

    body = ask(user_client, agent, "Where must divers register before entering the water?")

    (call,) = chat_calls(openai_server)
    assert ANSWER_PAGE in call.body["messages"][0]["content"]
    assert "search_knowledge" not in json.dumps(call.body.get("tools") or [])
    citations = body["reply"]["citations"]
    assert citations[0]["document"] == "rules.pdf"


def test_a_base_of_another_project_is_never_searched(
        user_client, outsider, make_agent_type, make_agent, project, embedding_model,
        chat_model, openai_server):
    elsewhere = base_with(Project.objects.create(name="Elsewhere", owner=outsider),
                          embedding_model, name="Secrets")
    agent = agent_knowing(make_agent_type, make_agent, project, [elsewhere])
    openai_server.script(Reply(text="I do not know."))

    body = ask(user_client, agent, "Where do divers register?")

    assert body["status"] == "completed"
    (call,) = chat_calls(openai_server)
    assert "search_knowledge" not in json.dumps(call.body.get("tools") or [])
    assert "citations" not in body["reply"]
    assert not ModelCall.objects.filter(run_id=body["run_id"], operation="embedding").exists()


def test_the_admin_picks_a_types_knowledge_bases_from_a_list(
        admin_browser, project, embedding_model):
    base = KnowledgeBase.objects.create(project=project, name="Rules",
                                        embedding_model=embedding_model)
    page = admin_browser.get("/admin/runners/agenttype/add/").content.decode()
    assert f'<option value="{base.pk}">{project} / Rules</option>' in page

    admin_browser.post("/admin/runners/agenttype/add/", {
        "name": "Guide", "slug": "guide", "runner_id": LLM_AGENT_RUNNER_ID, "kind": "llm",
        "expertise": "[]", "model_params": "{}", "runner_config": "{}",
        "knowledge_bases": [str(base.pk)], "knowledge_retrieval": "auto", "is_active": "on",
        "sub_agent_links-TOTAL_FORMS": "0", "sub_agent_links-INITIAL_FORMS": "0"})

    guide = AgentType.objects.get(slug="guide")
    assert (guide.knowledge_bases, guide.knowledge_retrieval) == ([str(base.pk)], "auto")
