"""A knowledge base kept by a plugin's knowledge engine, as LangBot 4.x keeps one: made with
the engine's settings (checked against its forms, secrets write-only), its documents handed
to the engine's ingestion (which reads the file from the host), retrieval answered by the
engine, and the built-in agent citing what the engine found. Real runtime, fixture plugin
`e2e__engine` (it keeps paragraphs in the host's vectors and finds them by their words)."""

import pytest
import pytest_asyncio
from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core.files.uploadedfile import SimpleUploadedFile

from runners.conversations.input import Part
from runners.knowledge import services
from runners.knowledge.models import KnowledgeBase, KnowledgeDocument, PluginVector
from runners.models import (
    LLM_AGENT_RUNNER_ID,
    AgentInstance,
    AgentType,
    LLMModel,
    PluginInstallation,
)
from runners.tests.conversation_fixtures import through_the_door
from tests.fake_providers import Reply
from tests.timing import scaled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

ENGINE = "e2e/engine"
HANDBOOK = b"# Ferries\n\nThe ferry leaves the north pier hourly.\n\nTickets are sold on board."
SEARCH = Reply(text="", tool_calls=[{"id": "call-kb", "name": "search_knowledge",
                                     "arguments": '{"query": "ferry pier"}'}])


@pytest_asyncio.fixture
async def engine_gateway(own_gateway):
    gateway = await own_gateway("e2e__engine")
    await gateway.discover(scaled(30))
    return gateway


async def as_a_request(call, *args, **kwargs):
    """`call` in a thread of its own, as daphne runs a request's view: the engine's calls back
    to the host meanwhile run on the process's shared sync thread."""
    async with ThreadSensitiveContext():
        return await sync_to_async(call)(*args, **kwargs)


def bases_url(project) -> str:
    return f"/api/v1/projects/{project.pk}/knowledge-bases"


def make_base(client, project, embedding_model, **fields):
    return client.post(bases_url(project), {
        "name": "Harbour", "embedding_model_id": embedding_model.pk, "engine": ENGINE,
        "engine_settings": {"label": "harbour", "api_key": "s3cret-key"},
        "retrieval_settings": {"prefix": "» "}, **fields}, format="json")


async def test_a_base_kept_by_an_engine_ingests_retrieves_and_is_cited(
        engine_gateway, user, user_client, project, embedding_model, openai_server):
    installation = await PluginInstallation.objects.aget(author="e2e", name="engine")
    assert installation.knowledge_engine["name"] == "paragraphs"
    assert installation.knowledge_engine["capabilities"] == ["doc_ingestion"]
    made = await as_a_request(make_base, user_client, project, embedding_model)
    assert made.status_code == 201, made.json()
    assert "s3cret-key" not in made.content.decode()
    base = made.json()
    uploaded = await as_a_request(user_client.post,
        f"{bases_url(project)}/{base['id']}/documents",
        {"file": [SimpleUploadedFile("handbook.md", HANDBOOK)]}, format="multipart")
    (document,) = uploaded.json()

    await services.ingest(document["id"])

    ingested = await KnowledgeDocument.objects.aget(pk=document["id"])
    assert (ingested.status, ingested.chunk_count) == ("ready", 3), ingested.status_reason
    # What the engine made is its own: in its collection of the host's vectors.
    assert await PluginVector.objects.filter(owner=ENGINE).acount() == 3
    hits = (await as_a_request(user_client.post,
        f"{bases_url(project)}/{base['id']}/retrieve", {"query": "north pier"},
        format="json")).json()
    assert hits[0]["text"] == "» The ferry leaves the north pier hourly."
    assert hits[0]["citation"]["document"] == "handbook.md"

    chat = await LLMModel.objects.acreate(name="fake-chat", provider=embedding_model.provider,
                                          upstream_model="chat", context_window=8000)
    agent_type = await AgentType.objects.acreate(
        name="Harbour guide", slug="harbour-guide", runner_id=LLM_AGENT_RUNNER_ID,
        primary_model=chat.name, knowledge_bases=[base["id"]])
    agent = await AgentInstance.objects.acreate(name="Guide", project=project,
                                                agent_type=agent_type)
    openai_server.script(SEARCH, Reply(text="From the north pier [1]."))
    answer, _ = await through_the_door(user, agent, [Part(text="Where does the ferry leave?")])

    assert answer["status"] == "completed", answer
    (reply,) = [message["data"]["message"] for message in answer["messages"]
                if message["type"] == "message.completed"]
    (citation, *_) = reply["provider_specific_fields"]["citations"]
    assert citation["document"] == "handbook.md"
    tool_message = next(m for m in openai_server.calls()[-1].body["messages"]
                        if m["role"] == "tool")
    assert "The ferry leaves the north pier hourly." in tool_message["content"]


async def test_an_engines_settings_are_checked_against_its_forms(
        engine_gateway, user_client, project, embedding_model):
    unknown = await as_a_request(make_base, user_client, project, embedding_model,
                                 engine="nobody/none")
    wrong = await as_a_request(make_base, user_client, project, embedding_model,
                               engine_settings={"colour": "red"})

    assert unknown.status_code == 400 and "engine" in unknown.json()["errors"]
    assert wrong.status_code == 400 and "colour" in str(wrong.json()["errors"]["engine_settings"])
    assert not await KnowledgeBase.objects.aexists()


async def test_removing_a_document_or_the_base_tells_its_engine(
        engine_gateway, user_client, project, embedding_model):
    base = (await as_a_request(make_base, user_client, project, embedding_model)).json()
    for name in ("one.md", "two.md"):
        (document,) = (await as_a_request(
            user_client.post, f"{bases_url(project)}/{base['id']}/documents",
            {"file": [SimpleUploadedFile(name, HANDBOOK)]}, format="multipart")).json()
        await services.ingest(document["id"])
    assert await PluginVector.objects.filter(owner=ENGINE).acount() == 6

    removed = await as_a_request(user_client.delete,
                                 f"{bases_url(project)}/{base['id']}/documents/{document['id']}")

    assert removed.status_code == 204
    # The engine removed that document's paragraphs from its collection, the other's stay.
    assert await PluginVector.objects.filter(owner=ENGINE).acount() == 3
    gone = await as_a_request(user_client.delete, f"{bases_url(project)}/{base['id']}")
    assert gone.status_code == 204 and not await KnowledgeBase.objects.aexists()
