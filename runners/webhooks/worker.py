"""Webhook delivery in the background of the process that owns work (the serving process on
the embedded default, a runtime worker past one process): due deliveries sent, then a wait of
POLL_SECONDS, or less when `wake()` says this process just queued one."""

import asyncio
import logging

from runners.webhooks import services

logger = logging.getLogger(__name__)

POLL_SECONDS = 1.0
_woken: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None


def wake() -> None:
    """A delivery was queued: the loop of this process, if it runs, looks at once."""
    if _woken is not None:
        loop, event = _woken
        loop.call_soon_threadsafe(event.set)


async def deliver_forever() -> None:
    global _woken
    event = asyncio.Event()
    _woken = (asyncio.get_running_loop(), event)
    try:
        while True:
            try:
                await services.deliver_due()
            except Exception:  # the next round tries again
                logger.exception("delivering webhooks failed")
            event.clear()
            try:
                await asyncio.wait_for(event.wait(), POLL_SECONDS)
            except TimeoutError:
                pass
    finally:  # stopped: a delivery queued from now on waits for the next loop to start
        _woken = None
