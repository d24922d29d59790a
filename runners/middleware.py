"""Start the embedded runtime with the web server, not with the first run.

Daphne has no startup hook for applications, so the first request served on an event loop
starts the process's gateway in the background; the admin then shows runners as soon as they
load. (With `LANGHOST_RUNTIME_WORKER` there is nothing to start here.)
"""

import asyncio
import logging

from asgiref.sync import iscoroutinefunction, markcoroutinefunction

from runners.plugins.gateway import get_gateway

logger = logging.getLogger(__name__)


class RuntimeStartMiddleware:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.started = False
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request):
        if iscoroutinefunction(self.get_response):
            return self._acall(request)
        return self.get_response(request)  # not served by an ASGI server: no runtime to start

    async def _acall(self, request):
        if not self.started:
            self.started = True
            task = asyncio.get_running_loop().create_task(get_gateway().start())
            task.add_done_callback(_log_failure)
        return await self.get_response(request)


def _log_failure(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.warning("runtime start failed: %s", task.exception())
