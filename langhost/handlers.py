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
ledger, a query. Those go to the process's one thread for sync work (asgiref's
thread-sensitive executor, which the run loop and the WebSocket consumers use too). A warm
thread with one database connection serves them faster than many threads would: on SQLite
they contend for its one writer (each waiting in its busy handler), and every thread competes
for the GIL with the event loop. Such a request also costs no thread hop of its own: see
`handle_on_loop`.
"""

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext, iscoroutinefunction, sync_to_async
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers import asgi
from django.db import close_old_connections, reset_queries
from django.urls import Resolver404, get_resolver, set_script_prefix

# Executors kept for the next requests; past a burst, the ones beyond this are shut down.
IDLE_EXECUTORS_KEPT = 32
# How often the connections of the sync thread that async views share are tidied.
TIDY_SECONDS = 0.5


# Where `__call__` leaves the URL's match in the scope, so Django resolves it once, not twice.
RESOLVED = "langhost.resolver_match"


def serves_async_view(scope) -> bool:
    path = scope["path"]
    root = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root):]
    try:
        # The root URLconf's resolver, as `resolve()` would find it: no request has chosen
        # another one yet, so the asgiref-local override it looks up first is not read.
        scope[RESOLVED] = get_resolver().resolve(path)
    except Resolver404:
        return False
    return iscoroutinefunction(scope[RESOLVED].func)


@sync_to_async
def tidy_connections() -> None:
    """What Django's `request_started` receivers do, on the thread that holds the connections:
    close the ones that broke or outlived CONN_MAX_AGE."""
    reset_queries()
    close_old_connections()


class ASGIHandler(asgi.ASGIHandler):
    def __init__(self):
        super().__init__()
        self.idle: list[ThreadPoolExecutor] = []
        self.tidy_due = 0.0

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        if serves_async_view(scope):
            await self.handle_on_loop(scope, receive, send)
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

    def resolve_request(self, request):
        match = request.scope.get(RESOLVED)
        if match is None or hasattr(request, "urlconf"):  # a middleware chose another URLconf
            return super().resolve_request(request)
        request.resolver_match = match
        return match

    async def handle_on_loop(self, scope, receive, send):
        """Django's `handle`, with the request signals sent on the loop.

        Django sends `request_started`, and closes the response (which sends
        `request_finished`), in the request's thread: two thread hops, as costly under load as
        a run's own database work. Their receivers (Django's) tidy that thread's database
        connections and reset per-request state. An async view opens no connection on the
        loop, so here they run on the loop, and the shared sync thread's connections are
        tidied at most every TIDY_SECONDS: a connection a database restart broke fails one
        request there, as it does in Django, and is replaced soon after.
        """
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        try:
            set_script_prefix(asgi.get_script_prefix(scope))
            if time.monotonic() >= self.tidy_due:
                self.tidy_due = time.monotonic() + TIDY_SECONDS
                await tidy_connections()
            signals.request_started.send(sender=self.__class__, scope=scope)
            request, response = self.create_request(scope, body_file)
            if request is None:
                await self.send_response(response, send)
            else:
                response = await self.respond_unless_gone(request, receive, send)
            if response is None:
                signals.request_finished.send(sender=self.__class__)
            else:
                response.close()
        finally:
            body_file.close()

    async def respond_unless_gone(self, request, receive, send):
        """The response, sent; None when the client went away first and the view was
        cancelled (as in Django's `handle`). The view runs in this task, not in one of its
        own: a listener cancels it if the client leaves."""
        view = asyncio.current_task()
        answering = True

        def client_left(listener: asyncio.Task) -> None:
            if not listener.cancelled() and listener.exception() is not None and answering:
                view.cancel()

        listening = asyncio.create_task(self.listen_for_disconnect(receive))
        listening.add_done_callback(client_left)
        try:
            response = await self.run_get_response(request)
            try:
                await self.send_response(response, send)
            except asyncio.CancelledError:  # the client left meanwhile
                view.uncancel()
            return response
        except asyncio.CancelledError:
            if not listening.done() or listening.cancelled():
                raise  # not the client: the server is stopping
            view.uncancel()
            return None
        finally:
            answering = False
            listening.cancel()
