"""Work no request asks for, done by the process that owns work (the serving process on the
embedded default; each runtime worker past one process): queued runs whose process went
away are started, and schedules fire. Every process may do it at once: each step claims
what it takes in the database first."""

import asyncio
import logging

from django.conf import settings

from runners.conversations import background
from runners.runtime import liveness
from runners.schedules import services as schedules

logger = logging.getLogger(__name__)

POLL_SECONDS = 1.0


async def work_once() -> None:
    await background.resume_orphaned_runs()
    await schedules.fire_due()


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
