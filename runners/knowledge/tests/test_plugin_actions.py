"""What a plugin may ask of knowledge past the SDK's run API, over the real runtime: vector
collections of its own (another plugin, even a copy of it under another name, sees none of
them), the file of a document of a base granted to its run (and no other), and a parser
plugin parsing that file."""

import json
import shutil

import pytest
import yaml
from asgiref.sync import sync_to_async
from django.core.files.uploadedfile import SimpleUploadedFile

from accounts.models import Project
from runners.execution.orchestrator import Orchestrator
from runners.knowledge import services
from runners.knowledge.models import KnowledgeBase, PluginVector
from runners.plugins.gateway import LocalGateway
from runners.protocol import AgentBinding, AgentEventEnvelope
from runners.tests.conftest import FIXTURE_PLUGINS, serve_as_process_gateway
from tests.timing import scaled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

PLUGIN = "e2e__agent-runner-llm"
NOTES = [("n1", [1, 0, 0, 0], "Anchoring is forbidden in the marina.", {"file_id": "f1"}),
         ("n2", [0, 1, 0, 0], "Fuel is sold at the east quay.", {"file_id": "f2"}),
         ("n3", [0.9, 0.1, 0, 0], "The marina office opens at seven.", {"file_id": "f2"})]
HANDBOOK = b"# Ferries\n\nThe ferry leaves hourly.\n\nTickets are sold on board."


@pytest.fixture
async def gateway(tmp_path, monkeypatch):
    """The LLM fixture plugin, and a copy of it under another name (another plugin)."""
    plugins = tmp_path / "plugins"
    shutil.copytree(FIXTURE_PLUGINS / PLUGIN, plugins / PLUGIN)
    twin = plugins / "e2e__agent-runner-twin"
    shutil.copytree(FIXTURE_PLUGINS / PLUGIN, twin)
    manifest = yaml.safe_load((twin / "manifest.yaml").read_text())
    manifest["metadata"]["name"] = "agent-runner-twin"
    (twin / "manifest.yaml").write_text(yaml.safe_dump(manifest))
    gateway = LocalGateway(plugins_dir=plugins, runtime_dir=tmp_path / "runtime", url="",
                           instance="plugin-actions")
    serve_as_process_gateway(monkeypatch, gateway)
    await gateway.start()
    await gateway.discover(scaled(30))
    yield gateway
    await gateway.stop()


async def actions(gateway, plugin: str, steps: list[dict], project_id=None, **config) -> list:
    outcome = await Orchestrator(gateway).run_to_end(
        AgentEventEnvelope(project_id=str(project_id or ""), input={"text": json.dumps(steps)}),
        AgentBinding(binding_id="raw", runner_id=f"plugin:e2e/{plugin}/raw-actions",
                     runner_config=config))
    assert outcome["status"] == "completed", outcome["status_reason"]
    return json.loads(outcome["messages"][0]["data"]["message"]["content"])


def step(action: str, **data) -> dict:
    return {"action": action, "data": {"collection_id": "notes", **data}}


async def test_a_plugins_vector_collections_are_its_own(gateway):
    upsert = step("vector_upsert", ids=[n[0] for n in NOTES], vectors=[n[1] for n in NOTES],
                  documents=[n[2] for n in NOTES], metadata=[n[3] for n in NOTES])

    report = await actions(gateway, "agent-runner-llm", [
        upsert,
        step("vector_search", query_vector=[1, 0, 0, 0], top_k=2),
        step("vector_search", query_vector=[1, 0, 0, 0], top_k=2, filters={"file_id": "f2"}),
        step("vector_search", query_vector=[], top_k=2, search_type="full_text",
             query_text="fuel quay"),
        step("vector_search", query_vector=[0, 1, 0, 0], top_k=3, search_type="hybrid",
             query_text="marina"),
        step("vector_upsert", ids=["bad"], vectors=[[1, 0]]),
        step("vector_delete", file_ids=["f1"]),
        step("vector_list", limit=10)])
    twin = await actions(gateway, "agent-runner-twin", [
        step("vector_list"), step("vector_search", query_vector=[1, 0, 0, 0]),
        step("vector_delete", filters={})])

    written, nearest, filtered, by_words, hybrid, refused, deleted, listed = report
    assert written == {"ok": {}}
    assert [hit["id"] for hit in nearest["ok"]["results"]] == ["n1", "n3"]
    assert nearest["ok"]["results"][0]["distance"] == pytest.approx(0.0, abs=1e-6)
    assert [hit["id"] for hit in filtered["ok"]["results"]] == ["n3", "n2"]
    assert by_words["ok"]["results"][0]["id"] == "n2"
    assert {hit["id"] for hit in hybrid["ok"]["results"]} == {"n1", "n2", "n3"}
    assert "vector.bad_arguments" in refused["error"] and "dimensions" in refused["error"]
    assert deleted == {"ok": {"count": 1}}
    assert listed["ok"]["total"] == 2
    assert [item["id"] for item in listed["ok"]["items"]] == ["n2", "n3"]
    assert twin == [{"ok": {"items": [], "total": 0}}, {"ok": {"results": []}},
                    {"ok": {"count": 0}}]
    owners = await sync_to_async(set)(PluginVector.objects.values_list("owner", flat=True))
    assert owners == {"e2e/agent-runner-llm"}


@sync_to_async
def base_with_handbook(owner, embedding_model, name: str) -> tuple[KnowledgeBase, str]:
    project = Project.objects.create(name=name, owner=owner)
    knowledge_base = KnowledgeBase.objects.create(project=project, name=name,
                                                  embedding_model=embedding_model)
    document = services.add_document(knowledge_base,
                                     SimpleUploadedFile("handbook.md", HANDBOOK))
    return knowledge_base, document.file.name


async def test_a_runner_reads_its_granted_documents_file_and_a_parser_plugin_parses_it(
        gateway, user, outsider, embedding_model):
    mine, path = await base_with_handbook(user, embedding_model, "Harbour")
    _, theirs = await base_with_handbook(outsider, embedding_model, "Vault")

    fetched, parsers, parsed, other = await actions(gateway, "agent-runner-llm", [
        {"action": "get_knowledge_file_stream", "data": {"storage_path": path}},
        {"action": "list_parsers", "data": {"mime_type": "text/markdown"}},
        {"action": "invoke_parser", "data": {
            "plugin_author": "e2e", "plugin_name": "agent-runner-llm", "storage_path": path,
            "mime_type": "text/markdown", "filename": "handbook.md"}},
        {"action": "get_knowledge_file_stream", "data": {"storage_path": theirs}},
    ], project_id=mine.project_id, **{"knowledge-bases": [str(mine.pk)]})

    assert fetched == {"ok": {"file": {"size": len(HANDBOOK), "text": HANDBOOK.decode()}}}
    assert {(p["plugin_name"], p["name"]["en_US"]) for p in parsers["ok"]["parsers"]} >= {
        ("agent-runner-llm", "Shouty parser")}
    assert parsed["ok"]["text"] == HANDBOOK.decode().upper()
    assert [section["content"] for section in parsed["ok"]["sections"]][1] == (
        "THE FERRY LEAVES HOURLY.")
    assert "kb.not_granted" in other["error"]


async def test_a_retrieval_takes_filters_on_its_results_metadata(gateway, user, embedding_model):
    mine, _ = await base_with_handbook(user, embedding_model, "Harbour")
    await sync_to_async(services.add_document)(
        mine, SimpleUploadedFile("ferries-2.md", b"The ferry leaves hourly from the pier."))
    async for document in mine.documents.all():
        await services.ingest(document.pk)

    everything, filtered, refused = await actions(gateway, "agent-runner-llm", [
        {"action": "retrieve_knowledge", "data": {"kb_id": str(mine.pk),
                                                  "query_text": "ferry hourly", "top_k": 5}},
        {"action": "retrieve_knowledge", "data": {
            "kb_id": str(mine.pk), "query_text": "ferry hourly", "top_k": 5,
            "filters": {"document_name": {"$in": ["ferries-2.md"]}}}},
        {"action": "retrieve_knowledge", "data": {
            "kb_id": str(mine.pk), "query_text": "ferry", "filters": {"chunk": {"$near": 1}}}},
    ], project_id=mine.project_id, **{"knowledge-bases": [str(mine.pk)]})

    names = {hit["metadata"]["document_name"] for hit in everything["ok"]["results"]}
    assert names == {"handbook.md", "ferries-2.md"}
    assert {hit["metadata"]["document_name"] for hit in filtered["ok"]["results"]} == {
        "ferries-2.md"}
    assert "kb.bad_arguments" in refused["error"] and "$near" in refused["error"]
