"""Ingestion in the background of the process that owns work (the serving process on the
embedded default, a runtime worker past one process), never in a request.

The loop claims queued documents (an update that only one process can win) and ingests up
to `LANGHOST_KNOWLEDGE_INGESTION_SLOTS` at once, never two of one project: one project's
28 MB upload takes one slot, and another project's one-page document the next. It looks
again when a document is done, when `wake()` says one was just added in this process, or
after `POLL_SECONDS`. At start, documents a stopped process left half-ingested are queued
again, so an upload survives a restart.
"""

import asyncio
import logging

from asgiref.sync import sync_to_async
from django.conf import settings

from runners.knowledge import services
from runners.knowledge.models import KnowledgeDocument

logger = logging.getLogger(__name__)

POLL_SECONDS = 2.0
Status = KnowledgeDocument.Status
_woken: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None


def wake() -> None:
    """A document was queued: the loop of this process, if it runs, looks at once."""
    if _woken is not None:
        loop, event = _woken
        loop.call_soon_threadsafe(event.set)


@sync_to_async
def requeue_interrupted() -> int:
    return KnowledgeDocument.objects.filter(
        status__in=[Status.PARSING, Status.EMBEDDING]).update(status=Status.QUEUED)


@sync_to_async
def claim_next(busy_projects: set) -> tuple[str, object] | None:
    """The oldest queued document of a project none of `busy_projects`, now this process's to
    ingest, with its project's id; or None."""
    queued = KnowledgeDocument.objects.filter(status=Status.QUEUED).exclude(
        knowledge_base__project_id__in=busy_projects).order_by("created_at")
    for pk, project_id in queued.values_list("pk", "knowledge_base__project_id")[:5]:
        if KnowledgeDocument.objects.filter(pk=pk, status=Status.QUEUED).update(
                status=Status.PARSING):
            return pk, project_id
    return None


class Ingestion:
    """The documents this process ingests now, each a task, by project."""

    def __init__(self):
        self.in_flight: dict[asyncio.Task, object] = {}
        self.taken = 0

    async def fill(self) -> None:
        """Claim documents while a slot is free and one of a project not in flight waits."""
        while len(self.in_flight) < settings.LANGHOST_KNOWLEDGE_INGESTION_SLOTS:
            claimed = await claim_next(set(self.in_flight.values()))
            if claimed is None:
                return
            document_id, project_id = claimed
            self.in_flight[asyncio.ensure_future(services.ingest(document_id))] = project_id
            self.taken += 1

    async def settle(self, *also: asyncio.Future, timeout: float | None = None) -> None:
        """Wait until a document is done (or one of `also`, or `timeout`)."""
        done, _ = await asyncio.wait([*self.in_flight, *also], timeout=timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
        for task in done & self.in_flight.keys():
            del self.in_flight[task]
            if not task.cancelled() and task.exception() is not None:
                logger.error("knowledge ingestion failed", exc_info=task.exception())

    async def stop(self) -> None:
        """Stop what is in flight: its documents are queued again at the next start."""
        for task in self.in_flight:
            task.cancel()
        await asyncio.gather(*self.in_flight, return_exceptions=True)
        self.in_flight.clear()


async def drain() -> int:
    """Ingest queued documents until none is left; how many this process took."""
    ingestion = Ingestion()
    try:
        await ingestion.fill()
        while ingestion.in_flight:
            await ingestion.settle()
            await ingestion.fill()
    finally:
        await ingestion.stop()
    return ingestion.taken


async def ingest_forever() -> None:
    global _woken
    event = asyncio.Event()
    _woken = (asyncio.get_running_loop(), event)
    ingestion = Ingestion()
    try:
        requeued = await requeue_interrupted()
        if requeued:
            logger.info("knowledge: %d document(s) queued again after a restart", requeued)
        while True:
            event.clear()
            try:
                await ingestion.fill()
            except Exception:  # the database away, say: the next round tries again
                logger.exception("knowledge ingestion failed")
            woken = asyncio.ensure_future(event.wait())
            try:
                await ingestion.settle(woken, timeout=POLL_SECONDS)
            finally:
                woken.cancel()
    finally:
        _woken = None
        await ingestion.stop()
