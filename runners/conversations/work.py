"""Work no request asks for, done by the process that owns work (the serving process on the
embedded default; each runtime worker past one process): queued runs whose process went
away are started, schedules fire, and (with LANGHOST_LEDGER_RETENTION_DAYS) old runs leave
the ledger once an hour. Every process may do it at once: each step claims
what it takes in the database first."""

import asyncio
import logging
import time

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections

from ledger.services import retention
from runners.conversations import background
from runners.runtime import liveness
from runners.schedules import services as schedules

logger = logging.getLogger(__name__)

POLL_SECONDS = 1.0


# Ledger retention runs at most this often in a process.
PRUNE_EVERY_SECONDS = 3600
_pruned_at: float | None = None


async def work_once() -> None:
    await background.resume_orphaned_runs()
    await schedules.fire_due()
    await _prune_when_due()


async def _prune_when_due() -> None:
    global _pruned_at
    limit = retention.cutoff()
    now = time.monotonic()
    if limit is None or (_pruned_at is not None and now - _pruned_at < PRUNE_EVERY_SECONDS):
        return
    _pruned_at = now
    # On a thread of its own: the process's shared sync thread keeps serving runs meanwhile.
    pruned = await sync_to_async(_prune, thread_sensitive=False)(limit)
    if pruned.runs:
        logger.info("retention: removed %d run(s) created before %s", pruned.runs,
                    limit.isoformat())


def _prune(limit) -> retention.Pruned:
    try:
        pruned = retention.prune(limit)
        if pruned.runs:
            retention.reclaim_space()
        return pruned
    finally:
        close_old_connections()  # this thread's connection is not a request's


async def work_forever() -> None:
    while True:
        try:
            await liveness.recycle_db_connections()
            await work_once()
        except Exception:  # the database away, say: the next round tries again
            logger.exception("background work failed")
        await asyncio.sleep(POLL_SECONDS)


_working: asyncio.Task | None = None


def start() -> None:
    """Start `work_forever` on the running loop, once per process (unless
    `LANGHOST_BACKGROUND_WORK` is off)."""
    global _working
    if settings.LANGHOST_BACKGROUND_WORK and _working is None:
        _working = asyncio.get_running_loop().create_task(work_forever())
