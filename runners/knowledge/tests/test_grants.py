"""Knowledge bases granted to a run, over the real SDK runtime: a runner lists the bases its
binding names and retrieves from one through the SDK; a base of another project is never
granted, and asking the host for it past the SDK's check is refused `kb.not_granted`."""

import json

import pytest
from asgiref.sync import sync_to_async
from django.core.files.uploadedfile import SimpleUploadedFile

from accounts.models import Project
from ledger.models import ModelCall
from runners.catalogue.bindings import implied_agent_binding, resolve
from runners.execution.orchestrator import Orchestrator
from runners.knowledge import services
from runners.knowledge.models import KnowledgeBase
from runners.knowledge.tests.conftest import pdf_with
from runners.models import AgentInstance, AgentType, Binding, LLMModel
from runners.protocol import AgentBinding, AgentEventEnvelope

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

READER = "plugin:e2e/agent-runner-llm/kb-reader"


@sync_to_async
def base_of(owner, name: str, embedding_model, *pages: str) -> KnowledgeBase:
    project = Project.objects.create(name=name, owner=owner)
    knowledge_base = KnowledgeBase.objects.create(project=project, name=name,
                                                  embedding_model=embedding_model)
    services.add_document(knowledge_base, SimpleUploadedFile(f"{name}.pdf", pdf_with(*pages)))
    return knowledge_base


async def ingested(knowledge_base: KnowledgeBase) -> None:
    async for document in knowledge_base.documents.all():
        await services.ingest(document.pk)


async def read(gateway, project_id, text: str, **config) -> dict:
    outcome = await Orchestrator(gateway).run_to_end(
        AgentEventEnvelope(project_id=str(project_id), input={"text": text}),
        AgentBinding(binding_id="kb", runner_id=READER, runner_config=config))
    assert outcome["status"] == "completed", outcome["status_reason"]
    return json.loads(outcome["messages"][0]["data"]["message"]["content"])


async def test_a_runner_lists_and_retrieves_its_granted_base_and_not_another_projects(
        llm_plugin_gateway, user, outsider, embedding_model):
    mine = await base_of(user, "Harbour", embedding_model,
                         "Divers register with the harbour master before diving.")
    theirs = await base_of(outsider, "Secrets", embedding_model, "The vault code is 1234.")
    await ingested(mine)
    await ingested(theirs)

    report = await read(llm_plugin_gateway, mine.project_id, "where do divers register",
                        **{"knowledge-bases": [str(mine.pk), str(theirs.pk)],
                           "probe-kb": str(theirs.pk)})

    # (The SDK lists the run's grants itself, from its context.)
    assert report["listed"] == [{"uuid": str(mine.pk), "name": "Harbour", "type": "vector"}]
    (top, *_) = report["retrieved"]
    assert "register with the harbour master" in top["content"][0]["text"]
    assert top["metadata"]["document_name"] == "Harbour.pdf" and top["score"] > 0
    assert "kb.not_granted" in report["probe"]["error"]
    assert "1234" not in json.dumps(report)


async def test_a_policy_narrows_the_bases_and_a_runner_named_none_gets_none(
        llm_plugin_gateway, user, embedding_model):
    mine = await base_of(user, "Harbour", embedding_model, "Ferries leave hourly.")

    report = await read(llm_plugin_gateway, mine.project_id, "ferries",
                        **{"probe-kb": str(mine.pk)})

    assert report["listed"] == [] and report["retrieved"] is None
    assert "kb.not_granted" in report["probe"]["error"]


async def test_a_runner_reranks_what_it_retrieved_with_its_granted_rerank_model(
        llm_plugin_gateway, user, embedding_model):
    mine = await base_of(user, "Harbour", embedding_model,
                         "Ferries leave hourly from the north pier.",
                         "Divers register with the harbour master before diving.")
    await ingested(mine)
    reranker = await LLMModel.objects.acreate(
        name="fake-reranker", provider_id=embedding_model.provider_id,
        upstream_model="reranker", model_type="rerank")

    report = await read(llm_plugin_gateway, mine.project_id, "where do divers register",
                        **{"knowledge-bases": [str(mine.pk)], "rerank-model": str(reranker.pk)})

    texts = [entry["content"][0]["text"] for entry in report["retrieved"]]
    best = report["reranked"][0]
    assert "Divers register" in texts[best["index"]] and best["relevance_score"] == 0.5
    call = await ModelCall.objects.aget(operation="rerank")
    assert (call.model_name, call.status) == ("fake-reranker", "ok")


async def test_an_agent_types_knowledge_bases_fill_its_runners_selector(
        llm_plugin_gateway, user, embedding_model):
    mine = await base_of(user, "Harbour", embedding_model, "Ferries leave hourly.")
    await ingested(mine)
    agent_type = await AgentType.objects.acreate(name="Reader", slug="reader", runner_id=READER,
                                                 knowledge_bases=[str(mine.pk)])
    agent = await AgentInstance.objects.select_related("agent_type", "project").aget(
        pk=(await AgentInstance.objects.acreate(name="Reader", agent_type=agent_type,
                                                project_id=mine.project_id)).pk)
    binding = await sync_to_async(implied_agent_binding)(agent)

    assert binding.runner_config["knowledge-bases"] == [str(mine.pk)]
    outcome = await Orchestrator(llm_plugin_gateway).run_to_end(
        AgentEventEnvelope(project_id=str(mine.project_id), input={"text": "ferries"}), binding)
    report = json.loads(outcome["messages"][0]["data"]["message"]["content"])
    assert [kb["uuid"] for kb in report["listed"]] == [str(mine.pk)]


async def test_a_binding_that_names_its_rerank_model_by_name_hands_the_runner_its_id(
        llm_plugin_gateway, user, embedding_model):
    mine = await base_of(user, "Harbour", embedding_model, "Ferries leave hourly.")
    reranker = await LLMModel.objects.acreate(
        name="fake-reranker", provider_id=embedding_model.provider_id,
        upstream_model="reranker", model_type="rerank")
    await Binding.objects.acreate(binding_id="harbour-reader", scope_type="project",
                                  scope_id=str(mine.project_id), runner_id=READER,
                                  runner_config={"knowledge-bases": [str(mine.pk)],
                                                 "rerank-model": "fake-reranker"})

    binding = await sync_to_async(resolve)(project_id=str(mine.project_id))

    assert binding.runner_config["rerank-model"] == str(reranker.pk)
