"""This process's part in running runs: one object per process, `host_process()`.

It owns the owner id that the lease of every run this process executes carries, the table of
those runs, their heartbeat and cancel watch, and the gateway to the plugin runtime.
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
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async

from ledger import owners
from ledger.models import RunStatus
from ledger.services import runs
from runners.execution.liveness import Heartbeat
from runners.execution.results import watch_ledger_cancels
from runners.plugins.loop_bound import LoopBoundGateway, submit

if TYPE_CHECKING:
    from runners.plugins.gateway import Gateway


class HostProcess:
    """This process: its owner id, its active runs and their heartbeat, its gateway."""

    def __init__(self):
        self.owner_id = owners.new_owner_id()
        # run id → the orchestrator's state of each run executing in this process
        self.active_runs: dict[str, Any] = {}
        # A copy: runs on other threads' loops come and go while the heartbeat reads.
        self.heartbeat = Heartbeat(self.owner_id, lambda: list(self.active_runs.copy()))
        self.gateway_binding: LoopBoundGateway | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # The heartbeat and the cancel watch, on the process's loop from the first run on.
        self._watches: tuple[concurrent.futures.Future, ...] = ()
        self._lock = threading.Lock()

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

    def gateway(self, make: Callable[[], "Gateway"]) -> LoopBoundGateway:
        """The process's gateway; the first call makes it (`make()`), bound to the process's
        loop."""
        if self.gateway_binding is None:
            loop = self.loop
            with self._lock:
                if self.gateway_binding is None:
                    self.gateway_binding = LoopBoundGateway(make(), loop)
        return self.gateway_binding

    def use_gateway(self, gateway: "Gateway") -> LoopBoundGateway:
        """Make `gateway`, bound to the running loop, this process's gateway."""
        self.gateway_binding = LoopBoundGateway(gateway, asyncio.get_running_loop())
        return self.gateway_binding

    def run_started(self, run_id: str, state: Any) -> None:
        """A run executes here from now on: its lease is renewed, and a cancel flagged in the
        ledger stops it, until `run_ended`."""
        self.active_runs[run_id] = state
        if not self._watches:
            loop = self.loop
            with self._lock:
                if not self._watches:
                    self._watches = (submit(self.heartbeat.beat_forever(), loop),
                                     submit(watch_ledger_cancels(self.active_runs.copy), loop))

    def run_ended(self, run_id: str) -> None:
        self.active_runs.pop(run_id, None)

    async def stop_runs(self, reason: str, grace: float) -> None:
        """Cancel every run this process executes with `reason`, give them `grace` seconds to
        be journaled, and end in the ledger whatever is still running under its owner id."""
        from runners.execution.orchestrator import Orchestrator

        for run_id in list(self.active_runs):
            await Orchestrator.cancel(run_id, reason)
        give_up = time.monotonic() + grace
        while self.active_runs and time.monotonic() < give_up:
            await asyncio.sleep(0.02)
        await sync_to_async(runs.fail_owned_runs_sync)(self.owner_id, reason,
                                                       RunStatus.CANCELLED)


_process: HostProcess | None = None
_process_lock = threading.Lock()


def host_process() -> HostProcess:
    global _process
    if _process is None:
        with _process_lock:
            if _process is None:
                _process = HostProcess()
    return _process
