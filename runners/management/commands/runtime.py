import asyncio
import contextlib
import fcntl
import itertools
import logging
import signal
from pathlib import Path

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.core.management.base import BaseCommand

from langhost.base.process_memory import settle_after_startup
from langhost.base.startup_lock import apply_migrations
from runners import work
from runners.observability import tracing
from runners.plugins.gateway import LocalGateway
from runners.runtime import RuntimeLinkError, health_server, worker
from runners.runtime.host_process import host_process
from runners.runtime.worker import RUNTIME_CHANNEL

logger = logging.getLogger("runners.runtime_command")


class Command(BaseCommand):
    help = (
        "Own the plugin runtime link in the foreground: spawn (or connect to) the runtime, keep "
        f"runner descriptors current, serve other processes on the '{RUNTIME_CHANNEL}' channel, "
        "and fail runs whose process stopped renewing their lease."
    )

    def add_arguments(self, parser):
        parser.add_argument("--health-port", type=int, help="answer GET /healthz on this "
                            "port of 127.0.0.1: 200 when the database, the Channels layer and "
                            "the runtime link are up, else 503")

    def handle(self, *args, health_port=None, **options):
        logging.getLogger("runners").setLevel(logging.INFO)
        tracing.setup()
        try:
            asyncio.run(self._serve_until_stopped(health_port))
        except KeyboardInterrupt:
            pass
        self.stdout.write("runtime stopped")

    async def _serve_until_stopped(self, health_port: int | None):
        """SIGTERM (a process manager's stop) ends the worker as Ctrl-C does: the runtime and
        its plugins stopped, this worker unregistered."""
        serving = asyncio.current_task()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, serving.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await self._serve(health_port)

    def _claim_runtime_dir(self) -> Path:
        """The first of `<data dir>/runtime-workers/1`, `2`, … that no live worker holds: each
        worker on a host runs its runtime in a dir of its own, and a restarted one reuses it."""
        base = Path(settings.DATA_DIR) / "runtime-workers"
        base.mkdir(parents=True, exist_ok=True)
        for number in itertools.count(1):
            lock = open(base / f"{number}.lock", "w")  # held for the process's life
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.close()
                continue
            self._runtime_dir_lock = lock
            return base / str(number)

    async def _serve(self, health_port: int | None):
        # This command's loop lives as long as the process: the runtime is bound to it.
        # Workers may start before any web process: the database is brought up to date first.
        await sync_to_async(apply_migrations)()
        local = LocalGateway(runtime_dir=self._claim_runtime_dir())
        local.listed_elsewhere = worker.listed_by_other_workers
        gateway = host_process().use_gateway(local)
        if health_port:
            await health_server.start(gateway, health_port)
        try:
            try:
                stored = await gateway.discover()
            except RuntimeLinkError as exc:
                # Keep serving: the link keeps reconnecting and discovers once it is ready.
                logger.warning("no runtime yet, still trying: %s", exc)
                stored = []
            status = await gateway.status()
            self.stdout.write(f"runtime {status['mode']} {status['state']}; "
                              f"{len(stored)} plugin runner(s): "
                              + ", ".join(d.pk for d in stored))
            self.stdout.flush()  # a pipe (service manager, test) sees the line now
            work.start()
            await asyncio.to_thread(settle_after_startup)
            await worker.serve(local, get_channel_layer())  # on this loop: no hand-over
        finally:
            await work.stop()
            await gateway.stop()
