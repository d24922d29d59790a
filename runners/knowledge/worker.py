"""Ingestion in the background of the process that owns work (the serving process on the
embedded default, a runtime worker past one process), never in a request.

The loop claims one queued document at a time (an update that only one process can win),
ingests it, and looks again; with nothing queued it waits `POLL_SECONDS`, or less when
`wake()` says a document was just added in this process. At start, documents a stopped
process left half-ingested are queued again, so an upload survives a restart.
"""

import asyncio
import logging

from asgiref.sync import sync_to_async

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
def claim_next() -> str | None:
    """The oldest queued document, now this process's to ingest, or None."""
    for pk in KnowledgeDocument.objects.filter(status=Status.QUEUED).order_by(
            "created_at").values_list("pk", flat=True)[:5]:
        if KnowledgeDocument.objects.filter(pk=pk, status=Status.QUEUED).update(
                status=Status.PARSING):
            return pk
    return None


async def drain() -> int:
    """Ingest queued documents until none is left; how many this process took."""
    taken = 0
    while (claimed := await claim_next()) is not None:
        await services.ingest(claimed)
        taken += 1
    return taken


async def ingest_forever() -> None:
    global _woken
    event = asyncio.Event()
    _woken = (asyncio.get_running_loop(), event)
    try:
        requeued = await requeue_interrupted()
        if requeued:
            logger.info("knowledge: %d document(s) queued again after a restart", requeued)
        while True:
            try:
                await drain()
            except Exception:  # the loop goes on: a document's own failure is on its row
                logger.exception("knowledge ingestion failed")
            event.clear()
            try:
                async with asyncio.timeout(POLL_SECONDS):
                    await event.wait()
            except TimeoutError:
                pass
    finally:
        _woken = None
