"""`/api/v1/projects/{id}/knowledge-bases`: members manage their project's knowledge bases
over REST; uploads answer 202 at once and are ingested in the background; retrieval returns
the chunk holding the answer first, with its citation; outsiders find nothing."""

import asyncio
import time

import pytest
from asgiref.sync import sync_to_async
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from accounts.models import Project
from runners.knowledge import services, worker
from runners.knowledge.models import Chunk, KnowledgeBase, KnowledgeDocument
from runners.knowledge.tests.conftest import pdf_with
from runners.models import LLMModel
from tests.timing import scaled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.backend]


@pytest.fixture
def project(user):
    return Project.objects.create(name="Harbour", owner=user)


def bases_url(project) -> str:
    return f"/api/v1/projects/{project.pk}/knowledge-bases"


@pytest.fixture
def base(user_client, project, embedding_model):
    created = user_client.post(bases_url(project), {
        "name": "Handbook", "embedding_model_id": str(embedding_model.pk),
        "chunk_size": 20, "chunk_overlap": 5}, format="json")
    assert created.status_code == 201, created.json()
    return created.json()


def documents_url(project, base) -> str:
    return f"{bases_url(project)}/{base['id']}/documents"


def test_uploads_are_queued_then_ingested_and_retrieval_finds_the_answer(
        user_client, project, base):
    uploaded = user_client.post(documents_url(project, base), {"file": [
        SimpleUploadedFile("handbook.md", b"# Ferry\n\nThe ferry leaves the north pier hourly."),
        SimpleUploadedFile("divers.pdf", pdf_with("Divers register with the harbour master."))]},
        format="multipart")

    assert uploaded.status_code == 202, uploaded.json()
    assert [doc["status"] for doc in uploaded.json()] == ["queued", "queued"]
    call_command("ingest_knowledge")
    listed = user_client.get(documents_url(project, base)).json()["data"]
    assert {doc["name"]: doc["status"] for doc in listed} == {"handbook.md": "ready",
                                                              "divers.pdf": "ready"}
    hits = user_client.post(f"{bases_url(project)}/{base['id']}/retrieve",
                            {"query": "where do divers register"}, format="json").json()
    assert hits[0]["citation"]["document"] == "divers.pdf"
    assert "harbour master" in hits[0]["text"]


def test_an_outsider_finds_no_knowledge_base(outsider_client, project, base):
    assert outsider_client.get(bases_url(project)).status_code == 404
    assert outsider_client.post(f"{bases_url(project)}/{base['id']}/retrieve",
                                {"query": "x"}, format="json").status_code == 404


def test_deleting_a_knowledge_base_removes_its_documents_and_chunks(user_client, project, base):
    user_client.post(documents_url(project, base),
                     {"file": [SimpleUploadedFile("a.md", b"The ferry leaves hourly.")]},
                     format="multipart")
    call_command("ingest_knowledge")
    assert Chunk.objects.exists()

    assert user_client.delete(f"{bases_url(project)}/{base['id']}").status_code == 204
    assert not Chunk.objects.exists()


def test_bad_settings_are_refused_naming_the_field(user_client, project, embedding_model):
    refused = user_client.post(bases_url(project), {
        "name": "Bad", "embedding_model_id": str(embedding_model.pk), "chunk_size": 50,
        "chunk_overlap": 60}, format="json")

    assert refused.status_code == 400
    assert "chunk_overlap" in refused.json()["errors"]



def test_the_admin_shows_each_documents_status_and_deleting_removes_its_chunks(
        user_client, project, base, admin_client):
    user_client.post(documents_url(project, base),
                     {"file": [SimpleUploadedFile("a.md", b"The ferry leaves hourly.")]},
                     format="multipart")
    call_command("ingest_knowledge")
    document = KnowledgeDocument.objects.get()

    listed = admin_client.get("/admin/knowledge/knowledgedocument/").content.decode()
    assert "a.md" in listed and "ready" in listed
    page = admin_client.get(f"/admin/knowledge/knowledgebase/{base['id']}/change/")
    assert page.status_code == 200 and "a.md" in page.content.decode()
    admin_client.post(f"/admin/knowledge/knowledgedocument/{document.pk}/delete/",
                      {"post": "yes"})
    assert not KnowledgeDocument.objects.exists() and not Chunk.objects.exists()


async def test_the_background_worker_ingests_what_is_queued_and_resumes_what_a_stop_left(
        user, embedding_model):
    project = await Project.objects.acreate(name="Harbour", owner=user)
    base = await KnowledgeBase.objects.acreate(project=project, name="Handbook",
                                               embedding_model=embedding_model)
    queued = await sync_to_async(services.add_document)(
        base, SimpleUploadedFile("a.md", b"The ferry leaves hourly."))
    interrupted = await sync_to_async(services.add_document)(
        base, SimpleUploadedFile("b.md", b"Tickets are sold on board."))
    await KnowledgeDocument.objects.filter(pk=interrupted.pk).aupdate(status="embedding")

    loop = asyncio.create_task(worker.ingest_forever())
    try:
        give_up = time.monotonic() + scaled(20)
        while await KnowledgeDocument.objects.exclude(status="ready").aexists():
            assert time.monotonic() < give_up, "the worker never finished"
            await asyncio.sleep(0.1)
    finally:
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)

    assert await Chunk.objects.filter(document_id__in=[queued.pk, interrupted.pk]).acount() == 2


def test_the_admin_uploads_several_files_and_tests_retrieval_on_its_page(
        project, base, admin_client, settings):
    upload = f"/admin/knowledge/knowledgebase/{base['id']}/upload/"
    page = admin_client.get(f"/admin/knowledge/knowledgebase/{base['id']}/change/").content
    assert b'id="knowledge-upload"' in page and upload.encode() in page

    admin_client.post(upload, {"files": [
        SimpleUploadedFile("ferries.md", b"The ferry leaves the north pier hourly."),
        SimpleUploadedFile("office.txt", b"The harbour office opens at seven.")]})
    settings.LANGHOST_ARTIFACT_MAX_BYTES = 10
    refused = admin_client.post(upload, {"files": [SimpleUploadedFile("big.md", b"x" * 11)]},
                                follow=True)
    call_command("ingest_knowledge")

    assert "over the 10-byte limit" in refused.content.decode()
    assert sorted(KnowledgeDocument.objects.values_list("name", "status")) == [
        ("ferries.md", "ready"), ("office.txt", "ready")]
    found = admin_client.get(f"/admin/knowledge/knowledgebase/{base['id']}/retrieve/",
                             {"query": "when does the harbour office open", "top_k": 1})
    hits = found.content.decode()
    assert found.status_code == 200
    assert hits.count('class="retrieval-hit"') == 1 and "office.txt" in hits
    assert "The harbour office opens at seven." in hits


def test_a_second_base_of_the_same_name_is_refused_naming_the_field(
        user_client, project, base, embedding_model):
    again = user_client.post(f"/api/v1/projects/{project.pk}/knowledge-bases",
                             {"name": base["name"], "embedding_model_id": str(embedding_model.pk)},
                             format="json")

    assert again.status_code == 400 and "name" in again.json()["errors"]


def test_a_model_a_base_embeds_with_cannot_be_deleted(superuser_client, base, embedding_model):
    refused = superuser_client.delete(f"/api/v1/models/{embedding_model.pk}")

    assert refused.status_code == 409
    assert base["name"] in refused.json()["detail"]


def test_the_admin_keeps_a_base_that_holds_vectors_on_its_model(
        user_client, project, base, admin_client, embedding_model):
    user_client.post(documents_url(project, base),
                     {"file": [SimpleUploadedFile("a.md", b"The ferry leaves hourly.")]},
                     format="multipart")
    call_command("ingest_knowledge")
    other = LLMModel.objects.create(name="other-embedder", provider=embedding_model.provider,
                                    upstream_model="other", model_type="embedding")

    page = admin_client.post(f"/admin/knowledge/knowledgebase/{base['id']}/change/", {
        "project": str(project.pk), "name": base["name"], "embedding_model": str(other.pk),
        "chunk_size": 20, "chunk_overlap": 5, "top_k": 5, "retrieval": "hybrid",
        "documents-TOTAL_FORMS": "1", "documents-INITIAL_FORMS": "1"})

    assert "holds vectors of its model already" in page.content.decode()
    assert KnowledgeBase.objects.get(pk=base["id"]).embedding_model == embedding_model
