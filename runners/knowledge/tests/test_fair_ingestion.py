"""Ingestion is fair and bounded: one project's large upload does not hold up another
project's small one, and a document or a project past its limits is refused naming them."""

import asyncio
import time

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.core.files.uploadedfile import SimpleUploadedFile

from accounts.models import Project
from runners.knowledge import services, worker
from runners.knowledge.models import Chunk, KnowledgeBase, KnowledgeDocument
from tests.timing import scaled

pytestmark = pytest.mark.django_db(transaction=True)

# 12 words a chunk: a thousand chunks, sixteen embedding calls.
LARGE = " ".join(f"ferry{n}" for n in range(12_000)).encode()
SMALL = b"The harbour office opens at seven."


def knowledge_base(owner, embedding_model, name: str) -> KnowledgeBase:
    project = Project.objects.create(name=name, owner=owner)
    return KnowledgeBase.objects.create(project=project, name=name, chunk_size=12,
                                        chunk_overlap=0, embedding_model=embedding_model)


def add(base: KnowledgeBase, name: str, data: bytes) -> KnowledgeDocument:
    return services.add_document(base, SimpleUploadedFile(name, data))


async def status_of(document: KnowledgeDocument) -> str:
    return (await KnowledgeDocument.objects.aget(pk=document.pk)).status


async def until(what: str, condition) -> None:
    give_up = time.monotonic() + scaled(30)
    while not await condition():
        assert time.monotonic() < give_up, f"{what} never happened"
        await asyncio.sleep(0.05)


async def test_another_projects_small_document_is_ready_while_a_large_one_ingests(
        user, embedding_model, openai_server):
    openai_server.embedding_delay = 0.3  # each of the large document's 16 calls
    large_base = await sync_to_async(knowledge_base)(user, embedding_model, "Archive")
    small_base = await sync_to_async(knowledge_base)(user, embedding_model, "Office")
    large = await sync_to_async(add)(large_base, "archive.txt", LARGE)
    loop = asyncio.create_task(worker.ingest_forever())
    try:
        await until("the large document's embedding",
                    lambda: KnowledgeDocument.objects.filter(
                        pk=large.pk, chunk_count=0, progress__gt=0.1).aexists())
        small = await sync_to_async(add)(small_base, "office.txt", SMALL)
        worker.wake()

        await until("the small document's ingestion",
                    lambda: KnowledgeDocument.objects.filter(pk=small.pk,
                                                             status="ready").aexists())
        assert await status_of(large) == "embedding"  # it goes on meanwhile
        await until("the large document's ingestion",
                    lambda: KnowledgeDocument.objects.filter(pk=large.pk,
                                                             status="ready").aexists())
    finally:
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)

    assert await Chunk.objects.filter(document_id=large.pk).acount() == 1000


async def test_two_documents_of_one_project_are_ingested_one_after_the_other(
        user, embedding_model, openai_server):
    openai_server.embedding_delay = 0.2
    base = await sync_to_async(knowledge_base)(user, embedding_model, "Archive")
    first = await sync_to_async(add)(base, "first.txt", SMALL)
    second = await sync_to_async(add)(base, "second.txt", SMALL)
    seen = set()

    async def watch():
        while True:
            seen.add(tuple([await status_of(first), await status_of(second)]))
            await asyncio.sleep(0.02)

    watching = asyncio.create_task(watch())
    try:
        assert await worker.drain() == 2
    finally:
        watching.cancel()

    assert not any(a in ("parsing", "embedding") and b in ("parsing", "embedding")
                   for a, b in seen)
    assert (await status_of(first), await status_of(second)) == ("ready", "ready")


def test_a_document_past_the_chunks_a_document_may_make_fails_naming_the_limit(
        user, embedding_model, settings):
    settings.LANGHOST_KNOWLEDGE_MAX_CHUNKS_PER_DOCUMENT = 999
    base = knowledge_base(user, embedding_model, "Archive")
    document = add(base, "archive.txt", LARGE)

    async_to_sync(services.ingest)(document.pk)

    document.refresh_from_db()
    assert document.status == "failed"
    assert "1000 chunks" in document.status_reason
    assert "LANGHOST_KNOWLEDGE_MAX_CHUNKS_PER_DOCUMENT" in document.status_reason
    assert not Chunk.objects.exists()


def test_a_document_past_the_projects_chunks_fails_and_the_others_stay(
        user, embedding_model, settings):
    settings.LANGHOST_KNOWLEDGE_MAX_CHUNKS_PER_PROJECT = 1001
    base = knowledge_base(user, embedding_model, "Archive")
    other_base = KnowledgeBase.objects.create(project=base.project, name="Office",
                                              chunk_size=12, embedding_model=embedding_model)
    kept = add(base, "archive.txt", LARGE)
    async_to_sync(services.ingest)(kept.pk)
    refused = add(other_base, "more.txt", b" ".join([SMALL] * 3))

    async_to_sync(services.ingest)(refused.pk)

    refused.refresh_from_db()
    assert refused.status == "failed"
    assert "1000 chunks" in refused.status_reason
    assert "LANGHOST_KNOWLEDGE_MAX_CHUNKS_PER_PROJECT" in refused.status_reason
    assert Chunk.objects.count() == 1000


def test_an_upload_past_the_projects_bytes_is_refused_naming_the_limit(
        user, user_client, embedding_model, settings):
    settings.LANGHOST_KNOWLEDGE_MAX_BYTES_PER_PROJECT = len(SMALL) * 2
    base = knowledge_base(user, embedding_model, "Office")
    url = f"/api/v1/projects/{base.project_id}/knowledge-bases/{base.pk}/documents"
    user_client.post(url, {"file": SimpleUploadedFile("a.txt", SMALL)}, format="multipart")

    refused = user_client.post(url, {"file": [SimpleUploadedFile("b.txt", SMALL),
                                              SimpleUploadedFile("c.txt", SMALL)]},
                               format="multipart")

    assert refused.status_code == 413
    assert "LANGHOST_KNOWLEDGE_MAX_BYTES_PER_PROJECT" in refused.json()["detail"]
    assert list(KnowledgeDocument.objects.values_list("name", flat=True)) == ["a.txt"]
