"""Work no request asks for, started, stopped and shown by this module alone.

The process that owns work (the serving process on the embedded default; past one process,
each runtime worker) runs a loop for each of: failing runs whose process died (the reaper),
ingesting knowledge documents, delivering webhooks, one that each second starts queued runs
whose process went away and fires schedules, and, with `LANGHOST_LEDGER_RETENTION_DAYS`, one
that prunes the ledger once an hour. Each loop has its own setting to turn it off. Every
process may run them at once: each step claims what it takes in the database first.
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections

from ledger.services import retention
from runners.conversations import background
from runners.knowledge import worker as knowledge_worker
from runners.runtime import liveness
from runners.schedules import services as schedules
from runners.webhooks import worker as webhook_worker

logger = logging.getLogger(__name__)

POLL_SECONDS = 1.0
# Ledger retention runs at most this often in a process, and looks whether it was turned on
# this often.
PRUNE_EVERY_SECONDS = 3600
RETENTION_LOOK_SECONDS = 60


def _every_poll(*steps: tuple[Callable[[], Awaitable], str]) -> Callable[[], Awaitable[None]]:
    """One loop for steps that poll the database each second: one connection recycle and one
    wake-up a round, whatever the number of steps (each costs the shared sync thread a hop)."""
    async def forever() -> None:
        while True:
            try:
                await liveness.recycle_db_connections()
            except Exception:  # the database away, say: the next round tries again
                logger.exception("recycling database connections failed")
            for step, what in steps:
                try:
                    await step()
                except Exception:  # one step failing leaves the others to run
                    logger.exception("%s failed", what)
            await asyncio.sleep(POLL_SECONDS)
    return forever


def _prune(limit) -> retention.Pruned:
    try:
        pruned = retention.prune(limit)
        if pruned.runs:
            retention.reclaim_space()
        return pruned
    finally:
        close_old_connections()  # this thread's connection is not a request's


async def _prune_forever() -> None:
    """Hourly while retention is on (a look a minute while it is off), on a thread of its
    own: the process's shared sync thread keeps serving runs, and the per-second loop keeps
    firing schedules, however long a first prune of a large ledger takes."""
    while True:
        limit = retention.cutoff()
        if limit is None:
            await asyncio.sleep(RETENTION_LOOK_SECONDS)
            continue
        try:
            pruned = await sync_to_async(_prune, thread_sensitive=False)(limit)
            if pruned.runs:
                logger.info("retention: removed %d run(s) created before %s", pruned.runs,
                            limit.isoformat())
        except Exception:  # the database away, say: the next hour tries again
            logger.exception("pruning the ledger failed")
        await asyncio.sleep(PRUNE_EVERY_SECONDS)


@dataclass
class Loop:
    name: str
    setting: str
    what: str
    run: Callable[[], Awaitable[None]]
    task: asyncio.Task | None = field(default=None, repr=False)

    @property
    def enabled(self) -> bool:
        return bool(getattr(settings, self.setting))

    def state(self) -> str:
        if self.task is None:
            return "running elsewhere" if settings.LANGHOST_RUNTIME_WORKER else (
                "not started" if self.enabled else f"off ({self.setting})")
        if not self.task.done():
            return "running"
        if self.task.cancelled():
            return "stopped"
        return f"failed: {self.task.exception()!r}"


LOOPS = (
    Loop("reaper", "LANGHOST_REAP_STALE_RUNS",
         "fails the runs whose process stopped renewing their lease", liveness.reap_forever),
    Loop("knowledge ingestion", "LANGHOST_KNOWLEDGE_INGESTION",
         "parses and embeds queued knowledge documents", knowledge_worker.ingest_forever),
    Loop("webhook delivery", "LANGHOST_WEBHOOK_DELIVERY",
         "sends due webhook deliveries", webhook_worker.deliver_forever),
    Loop("queued runs and schedules", "LANGHOST_BACKGROUND_WORK",
         "each second, starts queued runs whose process went away and fires due schedules",
         _every_poll((background.resume_orphaned_runs, "starting orphaned runs"),
                     (schedules.fire_due, "firing schedules"))),
    Loop("ledger pruning", "LANGHOST_BACKGROUND_WORK",
         "removes ended runs past LANGHOST_LEDGER_RETENTION_DAYS, hourly", _prune_forever),
)


_started = False


def start() -> None:
    """Start each enabled loop on the running event loop, once per process."""
    global _started
    if _started:
        return
    _started = True
    loop = asyncio.get_running_loop()
    for each in LOOPS:
        if each.enabled:
            each.task = loop.create_task(each.run(), name=f"work: {each.name}")


_serving = False


def start_in_serving_process() -> None:
    """`start()`, once in the serving process's life (a request arriving while it stops starts
    nothing again), unless runtime workers own the work (`LANGHOST_RUNTIME_WORKER`)."""
    global _serving
    if not _serving:
        _serving = True
        if not settings.LANGHOST_RUNTIME_WORKER:
            start()


async def stop() -> None:
    global _started
    _started = False
    # Cancel until they are gone: an SDK call (asyncio.wait_for on 3.11) can swallow a
    # cancellation that arrives just as its answer does, and the loop then runs on.
    while pending := [each.task for each in LOOPS if each.task and not each.task.done()]:
        for task in pending:
            task.cancel()
        await asyncio.wait(pending, timeout=0.5)
    for each in LOOPS:
        each.task = None


def status() -> list[dict]:
    """Each loop's name, what it does, its setting and its state in this process."""
    return [{"name": each.name, "what": each.what, "setting": each.setting,
             "state": each.state()} for each in LOOPS]
