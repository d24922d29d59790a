"""This process's part in running runs: one object per process, `host_process()`.

It owns the owner id that the lease of every run this process executes carries, the handles
of those runs (and of the runs whose host actions it forwards to another process), their
heartbeat and cancel watch, and the gateway to the plugin runtime.
Everything long-lived lives on one loop: the process's own, a daemon thread started on first
use. So sync callers (admin pages, views through `async_to_sync`, each on a throwaway loop)
and the server's loop all reach the same gateway, and a runtime spawned by it lives as long as
the process. A process whose own loop lives as long as it does (`manage.py serve`'s) adopts
that loop instead (`adopt_running_loop`): its requests then reach the gateway without crossing
threads. A command or test that keeps a long-lived loop of its own may bind its gateway there
(`use_gateway`).
"""

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable

from asgiref.sync import sync_to_async

from ledger import owners
from ledger.models import AgentRun, RunStatus
from ledger.selectors import runs as readers
from ledger.services import leases
from runners.runtime.liveness import Heartbeat
from runners.runtime.loop_bound import Gateway, LoopBoundGateway, submit
from runners.runtime.run_handle import RunHandle

logger = logging.getLogger(__name__)

CANCEL_POLL_SECONDS = 1.0


class HostProcess:
    """This process: its owner id, its runs' handles and their heartbeat, its gateway."""

    def __init__(self):
        self.owner_id = owners.new_owner_id()
        # run id → the handle of each run executing in this process
        self.active_runs: dict[str, RunHandle] = {}
        # run id → the handle of a run executing elsewhere whose host actions this process
        # answers (a runtime worker's) and forwards to it
        self.forwarded_runs: dict[str, RunHandle] = {}
        # ids of the queued runs this process waits to execute (their turn in a conversation)
        self.waiting_runs: set[str] = set()
        # how many runs started here so far: background work paces itself by it
        self.runs_started = 0
        # A copy: runs on other threads' loops come and go while the heartbeat reads.
        self.heartbeat = Heartbeat(self.owner_id, lambda: [*self.active_runs.copy(),
                                                           *self.waiting_runs.copy()])
        self.gateway_binding: LoopBoundGateway | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # The heartbeat and the cancel watch, on the process's loop from the first run on.
        self._watches: tuple[concurrent.futures.Future, ...] = ()
        self._lock = threading.Lock()
        # Set once the process stops its runs: a queued run waiting here starts no more.
        self.stopping = False
        # What holds resources on this loop and closes them when the process stops (MCP
        # sessions and their servers): registered by whoever opened them.
        self.closers: list[Callable[[], Awaitable]] = []

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The process's own event loop, running in a daemon thread from first use on."""
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                threading.Thread(target=self._loop.run_forever, name="langhost-process",
                                 daemon=True).start()
            return self._loop

    def adopt_running_loop(self) -> None:
        """The running loop, which lives as long as the process, becomes the process's loop
        (before anything used the process's own thread)."""
        with self._lock:
            if self._loop is not None:
                raise RuntimeError("the process loop is already running elsewhere")
            self._loop = asyncio.get_running_loop()

    def gateway(self, make: Callable[[], Gateway]) -> LoopBoundGateway:
        """The process's gateway; the first call makes it (`make()`), bound to the process's
        loop."""
        if self.gateway_binding is None:
            loop = self.loop
            with self._lock:
                if self.gateway_binding is None:
                    self.gateway_binding = LoopBoundGateway(make(), loop)
        return self.gateway_binding

    def use_gateway(self, gateway: Gateway) -> LoopBoundGateway:
        """Make `gateway`, bound to the running loop, this process's gateway."""
        self.gateway_binding = LoopBoundGateway(gateway, asyncio.get_running_loop())
        return self.gateway_binding

    def handle(self, run_id: str) -> RunHandle | None:
        """The handle of run `run_id` if it executes here, or its host actions are answered
        here for the process that executes it."""
        return self.active_runs.get(run_id) or self.forwarded_runs.get(run_id)

    async def written(self, run_id: str) -> None:
        """Return once run `run_id`, if it executes here, has its row in the ledger."""
        handle = self.handle(run_id)
        if handle is not None:
            await handle.written()

    def run_started(self, handle: RunHandle) -> None:
        """A run executes here from now on: its lease is renewed, and a cancel flagged in the
        ledger stops it, until `run_ended`."""
        self.active_runs[handle.run_id] = handle
        self.runs_started += 1
        self._watch()

    def run_waiting(self, run_id: str) -> None:
        """A queued run waits here for its turn: its lease is renewed until `run_ended`."""
        self.waiting_runs.add(run_id)
        self._watch()

    def _watch(self) -> None:
        if not self._watches:
            loop = self.loop
            with self._lock:
                if not self._watches:
                    self._watches = (submit(self.heartbeat.beat_forever(), loop),
                                     submit(self._watch_ledger_cancels(), loop))

    def run_ended(self, run_id: str) -> None:
        self.active_runs.pop(run_id, None)
        self.waiting_runs.discard(run_id)

    async def cancel(self, run_id: str, reason: str) -> AgentRun | None:
        """Flag the run in the ledger and, when it executes in this process, stop it now (one
        executing elsewhere stops within CANCEL_POLL_SECONDS: its process watches the flags)."""
        run = await leases.request_cancel(run_id, reason)
        handle = self.active_runs.get(run_id)
        if handle is not None and run is not None:
            handle.stop(RunStatus.CANCELLED, run.status_reason or "cancel_requested")
        return run

    async def _watch_ledger_cancels(self) -> None:
        """A cancel flagged in the ledger by another process (the admin, another server) stops
        the run within CANCEL_POLL_SECONDS: one query a tick for all the runs executing here."""
        while True:
            await asyncio.sleep(CANCEL_POLL_SECONDS)
            handles = self.active_runs.copy()
            if not handles:
                continue
            try:
                flagged = await readers.cancel_requests(list(handles))
            except Exception:  # the database away: the next tick asks again
                logger.exception("looking for cancelled runs failed")
                continue
            for run_id, reason in flagged.items():
                with contextlib.suppress(RuntimeError):  # its loop closed: the run is over
                    handles[run_id].stop(RunStatus.CANCELLED, reason or "cancel_requested")

    async def stop_runs(self, reason: str, grace: float) -> None:
        """Cancel every run this process executes with `reason`, give them `grace` seconds to
        be journaled, and end in the ledger whatever is still running under its owner id."""
        self.stopping = True
        for run_id in list(self.active_runs):
            await self.cancel(run_id, reason)
        give_up = time.monotonic() + grace
        while self.active_runs and time.monotonic() < give_up:
            await asyncio.sleep(0.02)
        await sync_to_async(leases.fail_owned_runs_sync)(self.owner_id, reason,
                                                       RunStatus.CANCELLED)


    def close_on_stop(self, close: Callable[[], Awaitable]) -> None:
        self.closers.append(close)

    async def close_resources(self, timeout: float) -> None:
        """Close what was registered (`close_on_stop`), within `timeout` in all; a closer that
        fails is logged, the others still run."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                for close in self.closers:
                    try:
                        await close()
                    except Exception:
                        logger.exception("closing %r at the process's stop failed", close)


_process: HostProcess | None = None
_process_lock = threading.Lock()


def host_process() -> HostProcess:
    global _process
    if _process is None:
        with _process_lock:
            if _process is None:
                _process = HostProcess()
    return _process
