"""Retrieval beyond the nearest vectors: the index each database searches with (sqlite-vec,
pgvector's HNSW), hybrid retrieval that finds by words what the vectors miss, and a rerank
model that reorders the candidates (recorded as a model call)."""

import pytest
from asgiref.sync import async_to_sync
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection

from accounts.models import Project
from ledger.models import ModelCall
from runners.knowledge import services, vectors
from runners.knowledge.models import KnowledgeBase
from runners.models import LLMModel, ModelProvider
from runners.providers import load_calls
from runners.runtime.process import free_port

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.backend]

# One passage per chunk (chunk size 8 words): the fake embeds a bag of words hashed into 64
# dimensions, so a rare word's bucket may collide; the keyword index sees the word itself.
PASSAGES = [
    "The ferry leaves the north pier hourly.",
    "Tickets are sold on board the ferry.",
    "The harbour office opens at seven daily.",
    "Divers register with the harbour master first.",
    "Anchoring is forbidden inside the marina basin.",
    "Fuel is sold at the east quay pontoon.",
]


@pytest.fixture
def knowledge_base(user, embedding_model):
    project = Project.objects.create(name="Harbour", owner=user)
    knowledge_base = KnowledgeBase.objects.create(
        project=project, name="Handbook", embedding_model=embedding_model, chunk_size=8,
        chunk_overlap=0, top_k=2)
    for index, passage in enumerate(PASSAGES):
        document = services.add_document(
            knowledge_base, SimpleUploadedFile(f"page-{index}.txt", passage.encode()))
        async_to_sync(services.ingest)(document.pk)
    return KnowledgeBase.objects.select_related("embedding_model").get(pk=knowledge_base.pk)


def retrieve(knowledge_base, query, top_k=None):
    return async_to_sync(services.retrieve)(knowledge_base, query, top_k)


def test_each_database_searches_its_own_vector_index(knowledge_base):
    expected = {"sqlite": "sqlite-vec", "postgresql": "pgvector"}[connection.vendor]
    assert vectors.engine() == expected
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT indexdef FROM pg_indexes WHERE tablename = %s",
                           [f"knowledge_vectors_{knowledge_base.dimensions}"])
            assert any("hnsw" in row[0] and "vector_cosine_ops" in row[0]
                       for row in cursor.fetchall())
    (hit,) = retrieve(knowledge_base, "when does the harbour office open", top_k=1)
    assert hit.text == PASSAGES[2]
    assert hit.score == pytest.approx(1 - hit.distance)


def test_hybrid_retrieval_finds_by_its_words_what_the_vectors_miss(knowledge_base):
    # By vectors the common words win ("the", "at": the fuel passage); only the marina
    # passage holds "anchoring".
    query = "anchoring the ferry at the pier"
    knowledge_base.retrieval = KnowledgeBase.Retrieval.VECTOR
    by_vectors = [hit.text for hit in retrieve(knowledge_base, query, top_k=2)]
    knowledge_base.retrieval = KnowledgeBase.Retrieval.HYBRID
    hybrid = [hit.text for hit in retrieve(knowledge_base, query, top_k=2)]

    assert PASSAGES[4] not in by_vectors
    assert PASSAGES[4] in hybrid
    assert retrieve(knowledge_base, "zzz qqq unheard words") != []  # the vectors still answer


def test_a_rerank_model_reorders_the_candidates_and_its_call_is_recorded(
        knowledge_base, embedding_model):
    reranker = LLMModel.objects.create(name="fake-reranker", provider=embedding_model.provider,
                                       upstream_model="reranker", model_type="rerank")
    knowledge_base.rerank_model = reranker
    knowledge_base.save()
    knowledge_base = KnowledgeBase.objects.select_related("embedding_model").get(
        pk=knowledge_base.pk)

    hits = retrieve(knowledge_base, "fuel sold at the quay")

    assert len(hits) == 2 and hits[0].text == PASSAGES[5]
    assert hits[0].score == pytest.approx(1.0)  # every word of the query is in it
    assert hits[1].score < 1.0
    call = ModelCall.objects.get(operation="rerank")
    # It ordered every candidate (the base has fewer chunks than the pool).
    assert (call.model_name, call.status, call.input_tokens) == (
        "fake-reranker", "ok", 2 * len(PASSAGES))


def test_a_rerank_model_that_fails_leaves_the_candidates_in_their_own_order(knowledge_base):
    nowhere = ModelProvider.objects.create(name="nowhere", kind="openai",
                                           base_url=f"http://127.0.0.1:{free_port()}/v1")
    knowledge_base.rerank_model = LLMModel.objects.create(
        name="down-reranker", provider=nowhere, upstream_model="reranker", model_type="rerank")

    hits = retrieve(knowledge_base, "when does the harbour office open")

    assert hits[0].text == PASSAGES[2]
    assert ModelCall.objects.get(operation="rerank").status == "error"


def test_a_rerank_call_passes_its_provider_specific_arguments_on(embedding_model, openai_server):
    reranker = LLMModel.objects.create(name="fake-reranker", provider=embedding_model.provider,
                                       upstream_model="reranker", model_type="rerank")

    ranked = async_to_sync(load_calls().invoke_rerank)(
        reranker, "fuel", ["fuel here", "nothing"], call=load_calls().CallInfo(caller="test"),
        extra={"return_documents": False, "model": "not this one"})

    assert ranked[0]["index"] == 0
    (sent,) = openai_server.calls("/rerank")
    assert sent.body["return_documents"] is False and sent.body["model"] == "reranker"
