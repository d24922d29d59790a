"""Writes to knowledge bases: documents added, ingested (parsed, chunked, embedded, indexed)
and removed, and retrieval, the one service every door and runner uses to search.

Ingestion moves a document `queued → parsing → embedding → ready`, or `failed` with the
reason, its progress stored as it goes; a failure touches no other document. Every
embedding call is a model call of the base's embedding model, recorded with its tokens and
cost. Removing a document (or a base) removes its chunks and their vectors.
"""

import asyncio
import hashlib
import logging
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import Sum

from langhost.base.heavy_writes import background_write
from ledger.models import message_text
from ledger.services.artifacts import max_bytes
from runners.knowledge import engines, keywords, parsing, vectors
from runners.knowledge.models import Chunk, KnowledgeBase, KnowledgeDocument
from runners.models import LLMModel
from runners.providers import load_calls, load_calls_off_the_loop
from runners.providers.errors import ProviderError
from runners.runtime.host_process import host_process

if TYPE_CHECKING:
    from runners.providers.calls import CallInfo

logger = logging.getLogger(__name__)

EMBEDDING_BATCH = 64
SPACE = "knowledge"
# With a rerank model, the candidates it orders: this many times the chunks kept.
RERANK_POOL = 4
# A hybrid search fuses the vector and keyword rankings to this many times its k.
HYBRID_DEPTH = 3
Status = KnowledgeDocument.Status


class DocumentTooLarge(ValueError):
    pass


class TooManyChunks(ValueError):
    pass


def add_documents(knowledge_base: KnowledgeBase,
                  uploads: list[UploadedFile]) -> list[KnowledgeDocument]:
    """Store uploaded files as queued documents of the base: all of them, or none when one
    is over the size limit for a file (`LANGHOST_ARTIFACT_MAX_BYTES`) or they would take the
    project's documents over theirs (`LANGHOST_KNOWLEDGE_MAX_BYTES_PER_PROJECT`)."""
    limit = max_bytes()
    for upload in uploads:
        if upload.size > limit:
            raise DocumentTooLarge(f"{upload.name} is {upload.size} bytes, over the "
                                   f"{limit}-byte limit for a file (LANGHOST_ARTIFACT_MAX_BYTES).")
    with transaction.atomic():
        held = KnowledgeDocument.objects.filter(
            knowledge_base__project_id=knowledge_base.project_id).aggregate(
            total=Sum("size"))["total"] or 0
        adding = sum(upload.size or 0 for upload in uploads)
        project_limit = settings.LANGHOST_KNOWLEDGE_MAX_BYTES_PER_PROJECT
        if held + adding > project_limit:
            raise DocumentTooLarge(
                f"The project's documents hold {held} bytes; {adding} more would pass its "
                f"{project_limit}-byte limit (LANGHOST_KNOWLEDGE_MAX_BYTES_PER_PROJECT).")
        return [add_document(knowledge_base, upload) for upload in uploads]


def add_document(knowledge_base: KnowledgeBase, upload: UploadedFile) -> KnowledgeDocument:
    """Store an uploaded file as a queued document of the base."""
    digest, head = hashlib.sha256(), b""
    for piece in upload.chunks():
        head = head or piece[:8]
        digest.update(piece)
    upload.seek(0)
    return KnowledgeDocument.objects.create(
        knowledge_base=knowledge_base, file=upload, name=upload.name or "document",
        mime_type=parsing.mime_type_of(upload.name or "", upload.content_type, head),
        size=upload.size or 0, sha256=digest.hexdigest())


def _save_progress(document: KnowledgeDocument, status: str, progress: float, **fields) -> None:
    document.status, document.progress = status, progress
    for name, value in fields.items():
        setattr(document, name, value)
    document.save(update_fields=["status", "progress", "updated_at", *fields])


async def _progress(document: KnowledgeDocument, status: str, progress: float, **fields) -> None:
    # On the thread of its chunks' writes: one connection writes them all, and its cache stays
    # warm instead of being dropped each time another connection writes.
    await background_write(_save_progress, document, status, progress, **fields)


def call_for(knowledge_base: KnowledgeBase) -> "CallInfo":
    return load_calls().CallInfo(project_id=str(knowledge_base.project_id),
                                caller=f"knowledge:{knowledge_base.pk}")


async def _embed(knowledge_base: KnowledgeBase, texts: list[str],
                 call: "CallInfo") -> list[list[float]]:
    """Raises ProviderError naming the base's embedding model."""
    model = knowledge_base.embedding_model
    try:
        return await load_calls().invoke_embedding(model, texts, call=call)
    except ProviderError as exc:
        raise ProviderError(f"embedding model '{model.name}' failed: {exc}",
                            status=exc.status, retryable=exc.retryable) from None


async def ingest(document_id) -> None:
    """Parse, chunk, embed and index a document (or hand it to its base's engine); it ends
    `ready` or `failed`."""
    document = await KnowledgeDocument.objects.select_related(
        "knowledge_base__embedding_model__provider").aget(pk=document_id)
    knowledge_base = document.knowledge_base
    if knowledge_base.engine:
        await _ingest_by_engine(document)
        return
    try:
        await load_calls_off_the_loop()
        call = call_for(knowledge_base)
        await _progress(document, Status.PARSING, 0.0)
        # Reading, parsing and chunking a large document is long work: off the loop.
        pieces = await asyncio.to_thread(_pieces, document)
        # Its writes, large ones, go to a thread of their own: the process's shared sync
        # thread goes on starting and ending runs. Ingested again, it starts over (once it is
        # known to fit: a document refused keeps the chunks it had).
        await background_write(_require_room, document, len(pieces))
        await background_write(remove_chunks, document)
        await _progress(document, Status.EMBEDDING, 0.1)
        made = 0
        for start in range(0, len(pieces), EMBEDDING_BATCH):
            began, runs_before = time.monotonic(), host_process().runs_started
            batch = pieces[start:start + EMBEDDING_BATCH]
            embedded = await _embed(knowledge_base, [piece.text for piece in batch], call)
            await background_write(_store, knowledge_base, document, start, batch, embedded)
            made += len(batch)
            await _progress(document, Status.EMBEDDING, 0.1 + 0.9 * made / len(pieces))
            await _yield_to_runs(began, runs_before)
        await _progress(document, Status.READY, 1.0, chunk_count=made, status_reason="")
    except (parsing.UnreadableDocument, TooManyChunks, ProviderError) as exc:
        await _progress(document, Status.FAILED, document.progress, status_reason=str(exc))
    except Exception as exc:  # recorded on the document, not raised: the others go on
        logger.exception("knowledge document %s failed", document.pk)
        await _progress(document, Status.FAILED, document.progress,
                        status_reason=f"{type(exc).__name__}: {exc}")


async def _ingest_by_engine(document: KnowledgeDocument) -> None:
    await _progress(document, Status.PARSING, 0.0)
    try:
        made = await engines.ingest(document)
    except engines.EngineError as exc:
        await _progress(document, Status.FAILED, 0.0, status_reason=str(exc))
    except Exception as exc:  # recorded on the document, not raised: the others go on
        logger.exception("knowledge document %s failed in its engine", document.pk)
        await _progress(document, Status.FAILED, 0.0,
                        status_reason=f"{type(exc).__name__}: {exc}")
    else:
        await _progress(document, Status.READY, 1.0, chunk_count=made, status_reason="")


def contents(document: KnowledgeDocument) -> bytes:
    with document.file.open("rb") as file:
        return file.read()


async def read_file(document: KnowledgeDocument) -> bytes:
    """The document's file, read off the loop."""
    return await asyncio.to_thread(contents, document)


async def _yield_to_runs(began: float, runs_before: int) -> None:
    """While runs go on in this process, ingestion takes at most half its time: a batch that
    overlapped a run is followed by a pause as long as the batch took."""
    process = host_process()
    if process.active_runs or process.runs_started != runs_before:
        await asyncio.sleep(time.monotonic() - began)


def _pieces(document: KnowledgeDocument) -> list[parsing.Passage]:
    found = parsing.passages(contents(document), document.mime_type)
    knowledge_base = document.knowledge_base
    return parsing.chunks(found, knowledge_base.chunk_size, knowledge_base.chunk_overlap)


def _require_room(document: KnowledgeDocument, chunks: int) -> None:
    """Raises TooManyChunks when the document's chunks pass a limit."""
    limit = settings.LANGHOST_KNOWLEDGE_MAX_CHUNKS_PER_DOCUMENT
    if chunks > limit:
        raise TooManyChunks(f"the document makes {chunks} chunks, over the {limit} a document "
                            f"may make (LANGHOST_KNOWLEDGE_MAX_CHUNKS_PER_DOCUMENT)")
    limit = settings.LANGHOST_KNOWLEDGE_MAX_CHUNKS_PER_PROJECT
    # The documents' own counts, not a count of the chunks: as cheap at a million chunks as at
    # none. Its own chunks of an earlier ingestion are replaced, so not counted.
    held = KnowledgeDocument.objects.filter(
        knowledge_base__project_id=document.knowledge_base.project_id).exclude(
        pk=document.pk).aggregate(total=Sum("chunk_count"))["total"] or 0
    if held + chunks > limit:
        raise TooManyChunks(f"the project's knowledge holds {held} chunks; this document's "
                            f"{chunks} would pass its {limit} "
                            f"(LANGHOST_KNOWLEDGE_MAX_CHUNKS_PER_PROJECT)")


@transaction.atomic
def _store(knowledge_base: KnowledgeBase, document: KnowledgeDocument, first: int,
           pieces: list[parsing.Passage], embedded: list[list[float]]) -> None:
    dimensions = len(embedded[0])
    if knowledge_base.dimensions is None:
        knowledge_base.dimensions = dimensions
        knowledge_base.save(update_fields=["dimensions", "updated_at"])
    elif dimensions != knowledge_base.dimensions:
        raise parsing.UnreadableDocument(
            f"the embedding model answered {dimensions} dimensions; this knowledge base "
            f"holds {knowledge_base.dimensions}")
    made = Chunk.objects.bulk_create(
        Chunk(document=document, knowledge_base=knowledge_base, position=first + index,
              text=piece.text, metadata=piece.metadata, vector=vectors.pack(vector))
        for index, (piece, vector) in enumerate(zip(pieces, embedded, strict=True)))
    if any(chunk.pk is None for chunk in made):  # a database that returns no ids on insert
        made = list(Chunk.objects.filter(document=document, position__gte=first)
                    .order_by("position"))
    partition = str(knowledge_base.pk)
    vectors.add(SPACE, partition, dimensions, [(chunk.pk, chunk.vector) for chunk in made])
    keywords.add(SPACE, partition, [(chunk.pk, chunk.text) for chunk in made])


def remove_chunks(document: KnowledgeDocument) -> None:
    chunk_ids = list(document.chunks.values_list("pk", flat=True))
    vectors.remove(SPACE, document.knowledge_base.dimensions, chunk_ids)
    keywords.remove(SPACE, chunk_ids)
    Chunk.objects.filter(pk__in=chunk_ids).delete()


def _tell_engine(tell, *about) -> None:
    """Tell a base's engine what happened to it once the change is committed (never while the
    transaction holds the database: the engine may write through the host); a failure is
    logged, LangHost's own rows stand (an engine that was away keeps what it stored)."""
    def tell_now():
        try:
            async_to_sync(tell)(*about)
        except engines.EngineError as exc:
            logger.warning("%s", exc)

    transaction.on_commit(tell_now)


def knowledge_base_created(knowledge_base: KnowledgeBase) -> None:
    if knowledge_base.engine:
        _tell_engine(engines.created, knowledge_base.engine, str(knowledge_base.pk),
                     engines.creation_settings(knowledge_base))


@transaction.atomic
def delete_document(document: KnowledgeDocument) -> None:
    """The document, its chunks, their vectors and its file, gone (and its engine told)."""
    if document.knowledge_base.engine:
        _tell_engine(engines.document_deleted, document.knowledge_base.engine,
                     str(document.knowledge_base_id), str(document.pk))
    remove_chunks(document)
    document.file.delete(save=False)
    document.delete()


@transaction.atomic
def delete_knowledge_base(knowledge_base: KnowledgeBase) -> None:
    for document in knowledge_base.documents.all():
        delete_document(document)
    if knowledge_base.engine:
        _tell_engine(engines.deleted, knowledge_base.engine, str(knowledge_base.pk))
    knowledge_base.delete()


@dataclass(frozen=True)
class Hit:
    """A chunk found, where it comes from, its cosine `distance` to the query and its
    `score`: what ordered it (the rerank model's relevance where one reranked, else the
    similarity, 1 - distance)."""

    chunk_id: int
    text: str
    score: float
    distance: float
    document_id: str
    document_name: str
    storage_path: str
    position: int
    metadata: dict

    def citation(self) -> dict:
        return {"document_id": self.document_id, "document": self.document_name,
                "chunk": self.position, "score": round(self.score, 4),
                **({"page": self.metadata["page"]} if "page" in self.metadata else {})}


async def retrieve(knowledge_base: KnowledgeBase, query: str, top_k: int | None = None,
                   call: "CallInfo | None" = None) -> list[Hit]:
    """The base's chunks that best answer `query`, best first: nearest by vector, fused with
    the keyword matches on a hybrid base, reordered by its rerank model if it has one. The
    embedding and rerank calls are recorded as `call` says (a run's, or the base's). Raises
    ProviderError when the embedding model fails."""
    k = top_k or knowledge_base.top_k
    if knowledge_base.engine:
        return await _engine_hits(knowledge_base, query, k)
    if knowledge_base.dimensions is None or not query.strip():
        return []
    await load_calls_off_the_loop()
    call = call or call_for(knowledge_base)
    (vector,) = await _embed(knowledge_base, [query], call)
    if len(vector) != knowledge_base.dimensions:
        raise ProviderError(
            f"embedding model '{knowledge_base.embedding_model.name}' answered {len(vector)} "
            f"dimensions; knowledge base '{knowledge_base.name}' holds {knowledge_base.dimensions}"
            " (it was ingested with another model: make a new base for this one)")
    pool = k * RERANK_POOL if knowledge_base.rerank_model_id else k
    hits = await sync_to_async(_search)(knowledge_base, vector, query, pool)
    if knowledge_base.rerank_model_id and hits:
        hits = await _reranked(knowledge_base, query, hits, k, call)
    return hits[:k]


async def _engine_hits(knowledge_base: KnowledgeBase, query: str, k: int) -> list[Hit]:
    """What the base's engine retrieves, as hits (its entries' text, their metadata)."""
    try:
        entries = await engines.retrieve(knowledge_base, query, k)
    except engines.EngineError as exc:
        raise ProviderError(str(exc), retryable=True) from None
    hits = []
    for position, entry in enumerate(entries):
        metadata = entry.get("metadata") if isinstance(entry.get("metadata"), dict) else {}
        distance = float(entry.get("distance") or 0.0)
        score = entry.get("score")
        hits.append(Hit(
            chunk_id=position, score=float(score) if score is not None else 1.0 - distance,
            text=message_text(entry.get("content")),
            distance=distance, document_id=str(metadata.get("document_id") or ""),
            document_name=str(metadata.get("document_name") or metadata.get("filename") or ""),
            storage_path=str(metadata.get("storage_path") or ""),
            position=metadata["chunk"] if isinstance(metadata.get("chunk"), int) else position,
            metadata=metadata))
    return hits


async def _reranked(knowledge_base: KnowledgeBase, query: str, hits: list[Hit], k: int,
                    call: "CallInfo") -> list[Hit]:
    model = await LLMModel.objects.select_related("provider").aget(
        pk=knowledge_base.rerank_model_id)
    try:
        ranked = await load_calls().invoke_rerank(model, query, [hit.text for hit in hits], call=call,
                                     top_n=k)
    except ProviderError as exc:  # the candidates in their own order beat no answer
        logger.warning("rerank model %s failed; knowledge base %s answers unreranked: %s",
                       model.name, knowledge_base.pk, exc)
        return hits
    return [replace(hits[item["index"]], score=item["relevance_score"]) for item in ranked]


def _search(knowledge_base: KnowledgeBase, vector: list[float], query: str,
            k: int) -> list[Hit]:
    partition = str(knowledge_base.pk)

    def rows():
        return Chunk.objects.filter(knowledge_base=knowledge_base).values_list(
            "pk", "vector").iterator(chunk_size=2000)

    hybrid = knowledge_base.retrieval == KnowledgeBase.Retrieval.HYBRID
    # Fused rankings reach deeper than k: an item second in one and fourth in the other
    # beats one first in one and absent from the other.
    depth = k * HYBRID_DEPTH if hybrid else k
    nearest = vectors.nearest(SPACE, partition, knowledge_base.dimensions, vector, depth, rows)
    ranking = [pk for pk, _ in nearest]
    if hybrid:
        matched = keywords.matching(SPACE, (partition,), query, depth)
        ranking = [pk for pk, _ in keywords.fused(nearest, matched, k=k)]
    chunks = {chunk.pk: chunk for chunk in Chunk.objects.filter(
        pk__in=ranking).select_related("document")}
    distances = dict(nearest)
    hits = []
    for pk in ranking:
        chunk = chunks.get(pk)
        if chunk is None:
            continue
        distance = distances.get(pk)
        if distance is None:  # found by its words only
            distance = vectors.cosine_distance(vector, vectors.unpack(bytes(chunk.vector)))
        hits.append(Hit(chunk_id=pk, text=chunk.text, score=1.0 - distance, distance=distance,
                        document_id=str(chunk.document_id), document_name=chunk.document.name,
                        storage_path=chunk.document.file.name, position=chunk.position,
                        metadata=chunk.metadata))
    return hits
