"""Django's ASGI handler, with the threads that run requests' sync work chosen, not made.

Django runs each request's sync work (a sync view, a database call from async code, signal
receivers) on a thread of its own, made for the request, so that a slow page never holds up
another request. Making a thread blocks the event loop until the thread runs, and under load
many threads contend for the interpreter and for SQLite's one writer: that cost more than the
requests' own work. So:

- API requests (`/api/`) share one thread: their database work is short (the hot endpoints
  are async views that hop to it only to read or write), and one thread serves it without
  contention;
- every other request (the admin's pages) still gets a thread of its own, kept for the next
  requests rather than made anew, so a slow page holds up no run.
"""

from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext
from django.core.handlers import asgi

API_PREFIX = "/api/"
# Page threads kept for the next requests; past a burst, the ones beyond this are shut down.
IDLE_EXECUTORS_KEPT = 32


class ASGIHandler(asgi.ASGIHandler):
    def __init__(self):
        super().__init__()
        self.api_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="langhost-api")
        self.idle: list[ThreadPoolExecutor] = []

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        if scope["path"].startswith(API_PREFIX):
            async with ThreadSensitiveContext(executor=self.api_thread):
                await self.handle(scope, receive, send)
            return
        executor = self.idle.pop() if self.idle else ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="langhost-page")
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        finally:
            if len(self.idle) < IDLE_EXECUTORS_KEPT:
                self.idle.append(executor)
            else:
                executor.shutdown(wait=False)
