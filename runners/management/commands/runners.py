import asyncio
import itertools
import sys

from asgiref.sync import sync_to_async
from django.core.management.base import CommandError

from langhost.base.commands import DatabaseCommand
from runners.models import RunnerDescriptor
from runners.plugins.gateway import get_gateway
from runners.runtime import RuntimeLinkError
from runners.runtime.worker import RuntimeUnavailable

SPINNER = "|/-\\"


class Command(DatabaseCommand):
    help = "List runner descriptors and whether they are available (--refresh asks the runtime first)."

    def add_arguments(self, parser):
        parser.add_argument("--refresh", action="store_true",
                            help="start or reach the runtime and wait until discovery settles")
        parser.add_argument("--timeout", type=float, default=15.0)

    def handle(self, *args, refresh, timeout, **options):
        if refresh:
            asyncio.run(self._refresh(timeout))
        else:
            self._list()

    def _list(self) -> None:
        rows = RunnerDescriptor.objects.order_by("source", "id")
        width = max([len(row.id) for row in rows] + [2])
        self.stdout.write(f"{'ID':<{width}}  AVAILABLE  SOURCE   VERSION  LABEL")
        for row in rows:
            self.stdout.write(f"{row.id:<{width}}  {'yes' if row.available else 'no':<9}  "
                              f"{row.source:<7}  {row.plugin_version or '-':<7}  {row.display_label}")
        self.stdout.flush()

    async def _refresh(self, timeout: float) -> None:
        gateway = get_gateway()
        discovery = asyncio.ensure_future(gateway.discover(timeout))
        spin = itertools.cycle(SPINNER)
        interactive = sys.stderr.isatty()
        try:
            while not discovery.done():
                if interactive:
                    sys.stderr.write(f"\r{next(spin)} waiting for the runtime's runners…")
                    sys.stderr.flush()
                await asyncio.wait({discovery}, timeout=0.1)
            if interactive:
                sys.stderr.write("\r" + " " * 40 + "\r")
            try:
                discovery.result()
            except (RuntimeLinkError, RuntimeUnavailable) as exc:
                raise CommandError(f"no answer from the runtime: {exc}") from exc
            # List before stopping the runtime: a stdio runtime takes a moment to shut down.
            await sync_to_async(self._list)()
        finally:
            await gateway.stop()
