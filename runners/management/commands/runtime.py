import asyncio
import logging

from channels.layers import get_channel_layer
from channels.worker import Worker
from django.core.management.base import BaseCommand

from runners.execution.process import host_process
from runners.plugins import health_server
from runners.plugins.gateway import LocalGateway
from runners.plugins.runtime import RuntimeLinkError
from runners.plugins.worker import RUNTIME_CHANNEL, RuntimeWorkerConsumer

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
        try:
            asyncio.run(self._serve(health_port))
        except KeyboardInterrupt:
            self.stdout.write("runtime stopped")

    async def _serve(self, health_port: int | None):
        # This command's loop lives as long as the process: the runtime is bound to it.
        gateway = host_process().use_gateway(LocalGateway())
        if health_port:
            await health_server.start(gateway, health_port)
        RuntimeWorkerConsumer.gateway = gateway
        worker = Worker(application=RuntimeWorkerConsumer.as_asgi(), channels=[RUNTIME_CHANNEL],
                        channel_layer=get_channel_layer())
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
            await worker.arun()
        finally:
            await gateway.stop()
