"""Django's ASGI handler, with request threads that are kept rather than made per request, and
none at all for the async views.

Django runs each request's sync work (a sync view, a database call from async code, signal
receivers) on a thread of its own, so a slow admin page never holds up another request: it
makes a thread for every request, and one more to join it at the end. Starting a thread blocks
the event loop until the thread runs, which under load costs more than the request's own
work. `ASGIHandler` keeps that one-thread-per-request rule for sync views, with threads that
are reused: a request borrows an idle single-thread executor (or makes one) and gives it back
when it ends.

An async view (the run endpoints) sends only short steps to a thread: a transaction of the
ledger, a query, Django's request signals. Those go to the process's one thread for sync work
(asgiref's thread-sensitive executor, which the run loop and the WebSocket consumers use too).
A warm thread with one database connection serves them faster than many threads would:
on SQLite they contend for its one writer (each waiting in its busy handler), and every
thread competes for the GIL with the event loop.
"""

from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext, iscoroutinefunction
from django.core.handlers import asgi
from django.urls import Resolver404, resolve

# Executors kept for the next requests; past a burst, the ones beyond this are shut down.
IDLE_EXECUTORS_KEPT = 32


def serves_async_view(scope) -> bool:
    path = scope["path"]
    root = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root):]
    try:
        return iscoroutinefunction(resolve(path).func)
    except Resolver404:
        return False


class ASGIHandler(asgi.ASGIHandler):
    def __init__(self):
        super().__init__()
        self.idle: list[ThreadPoolExecutor] = []

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        if serves_async_view(scope):
            await self.handle(scope, receive, send)
            return
        executor = self.idle.pop() if self.idle else ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="langhost-request")
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        finally:
            if len(self.idle) < IDLE_EXECUTORS_KEPT:
                self.idle.append(executor)
            else:
                executor.shutdown(wait=False)
