"""Reading a runner's results until its run must stop.

`next_result` waits for the runner's next result within the run's deadline, and gives up at
once when the run is stopped (`request_stop`: a cancel here, or one flagged in the ledger by
another process, which the process's cancel watch polls for). A wait may also be given a patience:
`Results` keeps a read that outlasts it under way (cancelling `anext()` of the stream would
close it, and cancel the runner) and the next read picks it up.
"""

import asyncio
import time
from collections.abc import AsyncIterator

from ledger.models import RunStatus
from runners.execution.deltas import END, next_or_end

# What `next_result` returns when no result came within its patience.
IDLE = object()


class Stop(Exception):
    """The run must stop before the runner's next result (cancelled, deadline passed)."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


class Results:
    """A runner's result stream, read with or without a patience."""

    def __init__(self, stream: AsyncIterator[dict]):
        self.stream = stream
        self.reading: asyncio.Future | None = None

    async def next(self, patience: float | None = None):
        """The next result; IDLE when none came within `patience` seconds (None: no limit).
        Raises StopAsyncIteration at the stream's end."""
        if self.reading is None:
            if patience is None:
                return await anext(self.stream)
            self.reading = asyncio.ensure_future(next_or_end(self.stream))
        done, _ = await asyncio.wait({self.reading}, timeout=patience)
        if not done:
            return IDLE
        reading, self.reading = self.reading, None
        result = reading.result()
        if result is END:
            raise StopAsyncIteration
        return result

    async def aclose(self) -> None:
        if self.reading is not None:
            self.reading.cancel()
            await asyncio.gather(self.reading, return_exceptions=True)
        await self.stream.aclose()


async def next_result(state, results: Results, patience: float | None = None):
    """The runner's next result for the run `state` tracks (IDLE: none within `patience`);
    raises Stop when the run must stop first."""
    if state.stop is None:
        loop_deadline = None
        if state.deadline is not None:
            loop_deadline = state.loop.time() + state.deadline - time.time()
        scope = state.waiting = asyncio.timeout_at(loop_deadline)
        try:
            async with scope:
                return await results.next(patience)
        except TimeoutError:
            if not scope.expired():
                raise  # the stream's own timeout, not the run's
            state.stop = state.stop or (RunStatus.TIMEOUT, "runner.timeout: Agent runner timed out")
        finally:
            state.waiting = None
    raise Stop(*state.stop)


def request_stop(state, status: str, reason: str) -> None:
    """Stop the run (the first reason wins), cutting short its wait for the next result."""
    if state.stop is None:
        state.stop = (status, reason)
    if state.waiting is not None and not state.waiting.expired():
        state.waiting.reschedule(state.loop.time())
