"""Run liveness: a `running` run stays alive only while the process executing it says so.

Every run starts with a lease of `LANGHOST_RUN_LEASE_SECONDS` that names its executing
process (its owner id). That process's heartbeat renews the leases of the runs it executes
every sixth of a lease, whether or not it owns the runtime link (with
`LANGHOST_RUNTIME_WORKER` the web processes execute the runs and another process owns the
runtime). A runtime owner reaps as often: runs whose lease ran out, because their process
died, are failed within about a lease.

Long-lived loops (these, the runtime worker) see no request cycle, so nothing else closes
their database connections: they recycle them each tick and each run, and a database restart
costs them one failed tick instead of every query until the process restarts.
"""

import asyncio
import logging
from collections.abc import Callable, Collection

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections

from ledger.services import leases

logger = logging.getLogger(__name__)

TICKS_PER_LEASE = 6


def tick_seconds() -> float:
    """How often leases are renewed and stale runs reaped."""
    return settings.LANGHOST_RUN_LEASE_SECONDS / TICKS_PER_LEASE


recycle_db_connections = sync_to_async(close_old_connections)


class Heartbeat:
    """Renews the leases of the runs this process executes (`run_ids()`), once a tick."""

    def __init__(self, owner_id: str, run_ids: Callable[[], Collection[str]]):
        self.owner_id = owner_id
        self.run_ids = run_ids

    async def beat_forever(self) -> None:
        while True:
            await asyncio.sleep(tick_seconds())
            await self.beat()

    async def beat(self) -> None:
        run_ids = list(self.run_ids())
        if not run_ids:
            return  # an idle process costs the database nothing
        try:
            await recycle_db_connections()
            await leases.renew_leases(self.owner_id, run_ids)
        except Exception:  # the next tick tries again, well within the lease
            logger.exception("renewing the leases of %d runs failed", len(run_ids))


async def reap_forever() -> None:
    """Fail the runs whose process stopped renewing their lease, once a tick."""
    while True:
        try:
            await recycle_db_connections()
            reaped = await leases.reap_stale_runs()
            if reaped:
                logger.warning("reaped %d stale runs: %s", len(reaped), ", ".join(reaped))
        except Exception:
            logger.exception("reaping stale runs failed")
        await asyncio.sleep(tick_seconds())
