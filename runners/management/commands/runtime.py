import asyncio
import logging

from channels.layers import get_channel_layer
from channels.worker import Worker
from django.core.management.base import BaseCommand

from runners.gateway import LocalGateway
from runners.runtime_worker import RUNTIME_CHANNEL, RuntimeWorkerConsumer


class Command(BaseCommand):
    help = (
        "Own the plugin runtime link in the foreground: spawn (or connect to) the runtime, keep "
        f"runner descriptors current, and serve other processes on the '{RUNTIME_CHANNEL}' channel."
    )

    def handle(self, *args, **options):
        logging.getLogger("runners").setLevel(logging.INFO)
        try:
            asyncio.run(self._serve())
        except KeyboardInterrupt:
            self.stdout.write("runtime stopped")

    async def _serve(self):
        gateway = LocalGateway()
        RuntimeWorkerConsumer.gateway = gateway
        worker = Worker(application=RuntimeWorkerConsumer.as_asgi(), channels=[RUNTIME_CHANNEL],
                        channel_layer=get_channel_layer())
        try:
            stored = await gateway.discover()
            status = await gateway.status()
            self.stdout.write(f"runtime {status['mode']} {status['state']}; "
                              f"{len(stored)} plugin runner(s): "
                              + ", ".join(d.pk for d in stored))
            await worker.arun()
        finally:
            await gateway.stop()
