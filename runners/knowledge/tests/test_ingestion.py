"""Documents become searchable chunks: parsed (Markdown, PDF page by page), chunked, embedded
through the base's embedding model (each call a model call), indexed; a damaged file fails
alone with its reason; deleting a document removes its chunks and vectors."""

import pytest
from asgiref.sync import async_to_sync
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection

from accounts.models import Project
from ledger.models import ModelCall
from runners.knowledge import services
from runners.knowledge.models import Chunk, KnowledgeBase
from runners.knowledge.tests.conftest import pdf_with

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.backend]

HANDBOOK = """# Harbour handbook

The ferry leaves the north pier every hour. Tickets are sold on board.

## Opening hours

The harbour office opens at seven in the morning and closes at six in the evening.
"""


@pytest.fixture
def knowledge_base(user, embedding_model):
    project = Project.objects.create(name="Harbour", owner=user)
    return KnowledgeBase.objects.create(project=project, name="Handbook",
                                        embedding_model=embedding_model, chunk_size=12,
                                        chunk_overlap=3, top_k=3)


def upload(knowledge_base, name: str, data: bytes, mime_type: str = ""):
    document = services.add_document(knowledge_base, SimpleUploadedFile(name, data, mime_type))
    async_to_sync(services.ingest)(document.pk)
    document.refresh_from_db()
    return document


def vector_rows(knowledge_base) -> int:
    """The base's vectors in the engine's index (sqlite-vec's or pgvector's table)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM knowledge_vectors_{knowledge_base.dimensions} "
                       "WHERE partition = %s", [str(knowledge_base.pk)])
        return cursor.fetchone()[0]


def test_markdown_and_pdf_become_ready_and_the_answer_is_found_first(knowledge_base):
    markdown = upload(knowledge_base, "handbook.md", HANDBOOK.encode())
    pdf = upload(knowledge_base, "tides.pdf", pdf_with(
        "Tide tables are posted daily at the pier.",
        "Divers must register with the harbour master before entering the water."),
        "application/pdf")

    assert (markdown.status, markdown.progress, markdown.status_reason) == ("ready", 1.0, "")
    assert pdf.status == "ready" and pdf.chunk_count == 2
    hits = async_to_sync(services.retrieve)(
        KnowledgeBase.objects.select_related("embedding_model").get(pk=knowledge_base.pk),
        "who must divers register with before entering the water")
    assert hits[0].document_name == "tides.pdf"
    assert "register with the harbour master" in hits[0].text
    assert hits[0].citation()["page"] == 2
    assert ModelCall.objects.filter(operation="embedding", status="ok").count() >= 3


def test_a_damaged_pdf_fails_alone_with_its_reason(knowledge_base):
    good = upload(knowledge_base, "handbook.md", HANDBOOK.encode())
    damaged = upload(knowledge_base, "broken.pdf", b"%PDF-1.4\nthis is no pdf at all",
                     "application/pdf")

    assert damaged.status == "failed"
    assert "PDF" in damaged.status_reason
    good.refresh_from_db()
    assert good.status == "ready" and good.chunk_count > 0


def test_deleting_a_document_removes_its_chunks_and_vectors(knowledge_base):
    keep = upload(knowledge_base, "handbook.md", HANDBOOK.encode())
    gone = upload(knowledge_base, "tides.pdf", pdf_with("Tide tables are posted daily."),
                  "application/pdf")
    knowledge_base.refresh_from_db()
    before = vector_rows(knowledge_base)

    services.delete_document(gone)

    assert not Chunk.objects.filter(document_id=gone.pk).exists()
    assert vector_rows(knowledge_base) == before - 1 == keep.chunk_count
