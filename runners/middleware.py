"""Start the embedded runtime with the web server, not with the first run.

Daphne has no startup hook for applications, so the first request served on the event loop
starts the gateway in the background; the admin then shows runners as soon as they load.
"""

import asyncio
import logging

from asgiref.sync import iscoroutinefunction, markcoroutinefunction

from runners.plugins.gateway import LocalGateway, get_gateway

logger = logging.getLogger(__name__)


class RuntimeStartMiddleware:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.started_loop = None
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request):
        if iscoroutinefunction(self.get_response):
            return self._acall(request)
        return self.get_response(request)  # no event loop of ours to run the runtime on

    async def _acall(self, request):
        loop = asyncio.get_running_loop()
        if self.started_loop is not loop:
            self.started_loop = loop
            gateway = get_gateway()
            if isinstance(gateway, LocalGateway):
                task = loop.create_task(gateway.discover())
                task.add_done_callback(_log_failure)
        return await self.get_response(request)


def _log_failure(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.warning("runtime start failed: %s", task.exception())
