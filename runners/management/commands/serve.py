import asyncio
import io
import json
import logging
import os
import signal
import sys

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from accounts.first_admin import has_admin, setup_token
from langhost.base import migrated_template
from langhost.base.parsers import upload_limit_text
from langhost.base.process_memory import settle_after_startup
from langhost.base.startup_lock import one_process_at_a_time
from ledger.services.leases import reap_stale_runs_sync
from runners import safety
from runners.runtime.sandbox import probe_in_background

logger = logging.getLogger(__name__)

# How long the runs cancelled by a shutdown get to be journaled before the server exits.
SHUTDOWN_GRACE_SECONDS = 3.0
# How long a WebSocket client gets to answer the server's close (autobahn's default: 1 s).
CLOSE_HANDSHAKE_SECONDS = 30.0
SHUTDOWN_REASON = "host.shutdown: the server is stopping"


class Command(BaseCommand):
    help = ("Apply migrations, make sure an admin exists, fail the runs of processes that are "
            "gone, and serve LangHost with daphne in this process; the plugin runtime starts "
            "meanwhile. SIGTERM or Ctrl-C stops taking requests, cancels the runs in flight "
            "(`host.shutdown`) and exits once they are journaled.")

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.environ.get("LANGHOST_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("LANGHOST_PORT", "8000")))

    def handle(self, *args, host, port, **options):
        # The port it serves on is LangHost's own, whatever LANGHOST_PORT says.
        settings.LANGHOST_SANDBOX_CLOSED_PORTS = sorted({*settings.LANGHOST_SANDBOX_CLOSED_PORTS,
                                                         port})
        # The runtime needs its answer: worked out beside the imports below.
        probe_in_background(settings.LANGHOST_PLUGIN_SANDBOX)
        refused = safety.refusal()
        if refused:
            raise CommandError(f"LangHost will not start: {refused}")
        failure = serve(host, port, lambda: self.prepare_database(host, port))
        if failure is not None:
            raise CommandError(f"LangHost could not start: {failure}")

    def prepare_database(self, host: str, port: int) -> None:
        # Worked out beside the runtime's start, which needs the same probes (cached).
        for warning in safety.warnings():
            self.stderr.write(self.style.WARNING(f"WARNING: {warning}"))
        with one_process_at_a_time():
            migrated_template.migrate()
            self.stdout.write("Database is up to date.")
            call_command("ensure_admin")
        reaped = reap_stale_runs_sync()
        if reaped:
            self.stdout.write(f"Failed {len(reaped)} run(s) left running by a stopped process.")
        url = f"http://{host}:{port}"
        self.stdout.write(self.style.SUCCESS(f"LangHost is serving at {url}/"))
        self.stdout.write(f"  admin:    {url}/admin/  (sign in with the admin account's email)")
        self.stdout.write(f"  API docs: {url}/api/docs/")
        if not has_admin():
            self.stdout.write(f"  no admin yet: POST {url}/api/v1/user/init "
                              f'{{"user", "password", "setup_token": "{setup_token()}"}} '
                              "(from this machine the token is not needed)")
        sys.stdout.flush()


def serve(host: str, port: int, prepare_database) -> Exception | None:
    """Run daphne's server on this process's loop until it is stopped; why it could not
    start, if it could not.

    The loop starts at once: the runtime starts on it while `prepare_database()` runs in a
    thread, and requests, taken meanwhile, are answered once that is done.
    """
    # daphne.server installs Twisted's asyncio reactor: imported before anything else of Twisted.
    from daphne import http_protocol
    from daphne import server as daphne_server
    from daphne.endpoints import build_endpoint_description_strings
    from daphne.server import Server
    from twisted.internet import reactor

    # The URLconf (every API view and serializer) loads now, before the runtime starts, and
    # not in the first request.
    from langhost import urls  # noqa: F401
    from langhost.asgi import application
    from runners import work
    from runners.box.server import stop_box_server
    from runners.runtime.host_process import host_process

    _pass_bodies_through(http_protocol.WebRequest)
    _refuse_bodies_past_their_limit(http_protocol.WebRequest)
    _no_access_log_lines(http_protocol.HTTPFactory)
    _wait_for_close_handshakes(daphne_server)
    loop = reactor._asyncioEventloop
    database_ready = asyncio.Event()

    async def once_ready(scope, receive, send):
        await database_ready.wait()
        await application(scope, receive, send)

    server = Server(application=once_ready, signal_handlers=False, verbosity=0,
                    endpoints=build_endpoint_description_strings(host=host, port=port))
    failure: list[Exception] = []
    listen_error = server.listen_error

    def cannot_listen(reason) -> None:  # daphne only logs it, and exits as if all went well
        failure.append(PortUnavailable(
            f"{host}:{port} cannot be listened on ({reason.getErrorMessage()}). If another "
            f"process has the port, stop it or serve on another one: LANGHOST_PORT=8001 "
            f"make run (or manage.py serve --port 8001)."))
        listen_error(reason)

    server.listen_error = cannot_listen
    starting: list[asyncio.Task] = []
    stopping: list[asyncio.Task] = []

    async def start() -> None:
        _start_runtime(database_ready)
        try:
            await asyncio.to_thread(prepare_database)
        except Exception as exc:  # reported by handle() once the loop has stopped
            failure.append(exc)
            server.stop()
            return
        database_ready.set()
        work.start_in_serving_process()
        # Once requests are answered: the first ones need not wait for it.
        await asyncio.to_thread(settle_after_startup)

    async def shut_down() -> None:
        for listening in server.listeners:  # take no more requests
            listening.addCallback(lambda listener: listener.stopListening())
        try:
            await host_process().stop_runs(SHUTDOWN_REASON, SHUTDOWN_GRACE_SECONDS)
        except Exception:  # the database away, say: the runs' leases end them later
            logger.exception("ending the runs in flight failed; stopping anyway")
        finally:
            await work.stop()
            await stop_box_server()
            # MCP servers end now, not at the process's exit (its loop would be stopped).
            await host_process().close_resources(SHUTDOWN_GRACE_SECONDS)
            server.stop()

    def on_signal(signum, frame) -> None:
        if stopping:  # asked twice: stop now
            loop.call_soon_threadsafe(server.stop)
        else:
            loop.call_soon_threadsafe(lambda: stopping.append(loop.create_task(shut_down())))

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    loop.call_soon(lambda: starting.append(loop.create_task(start())))
    server.run()
    return failure[0] if failure else None


class PortUnavailable(Exception):
    pass


def _start_runtime(database_ready: asyncio.Event) -> None:
    """The server's loop becomes the process's loop, so requests reach the gateway without
    crossing threads, and the runtime starts now: its plugins are handed over at once and
    recorded once the database is ready. (A runtime worker elsewhere is asked once it is.)"""
    from runners.plugins.gateway import LocalGateway, start_in_background
    from runners.runtime.host_process import host_process

    process = host_process()
    process.adopt_running_loop()
    if not settings.LANGHOST_RUNTIME_WORKER:
        process.use_gateway(LocalGateway(database_ready=database_ready))
        start_in_background()
    else:
        asyncio.get_running_loop().create_task(_when_set(database_ready, start_in_background))


async def _when_set(event: asyncio.Event, then) -> None:
    await event.wait()
    then()


def _wait_for_close_handshakes(daphne_server) -> None:
    """A socket's last frame (a run's final status) may still be unread in a busy client's
    buffer when the server closes. Autobahn aborts a close the client has not answered within
    its timeout with a TCP reset, which throws that unread frame away: so it waits longer."""
    factory = daphne_server.WebSocketFactory

    class PatientWebSocketFactory(factory):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.setProtocolOptions(closeHandshakeTimeout=CLOSE_HANDSHAKE_SECONDS)

    if factory.__name__ != PatientWebSocketFactory.__name__:
        daphne_server.WebSocketFactory = PatientWebSocketFactory


def _no_access_log_lines(factory_class) -> None:
    """Twisted formats a combined-log line for every request, which daphne (at the verbosity
    `serve` runs it with) sends nowhere: so none is formatted."""
    factory_class.log = lambda self, request: None


def _body_limit(headers) -> int:
    """The upload limit; for a request with no credentials (no token, key or session), the
    anonymous one: such a caller sends credentials, never files (`langhost.base.parsers`)."""
    credentials = (headers.hasHeader(b"authorization") or headers.hasHeader(b"x-api-key")
                   or any(settings.SESSION_COOKIE_NAME.encode() + b"=" in cookie
                          for cookie in headers.getRawHeaders(b"cookie", [])))
    return (settings.DATA_UPLOAD_MAX_MEMORY_SIZE if credentials
            else settings.LANGHOST_ANONYMOUS_BODY_MAX_BYTES)


def _refuse_bodies_past_their_limit(request_class) -> None:
    """A body past its limit is refused (413, JSON, the connection closed) as soon as its
    declared length says so, or as its chunks pass the limit: Twisted would read it whole,
    and daphne hand it over in one piece, before Django could refuse it."""
    got_length, handle_chunk = request_class.gotLength, request_class.handleContentChunk
    request_received = request_class.requestReceived

    def gotLength(self, length):
        self.body_limit, self.body_received = _body_limit(self.requestHeaders), 0
        if length is not None and length > self.body_limit:
            _refuse_as_too_large(self)
        else:
            got_length(self, length)

    def handleContentChunk(self, data):
        self.body_received += len(data)
        if getattr(self, "body_refused", False):
            return
        if self.body_received > self.body_limit:
            _refuse_as_too_large(self)
        else:
            handle_chunk(self, data)

    def requestReceived(self, command, path, version):
        if not getattr(self, "body_refused", False):  # else answered already: nothing more
            request_received(self, command, path, version)

    request_class.gotLength = gotLength
    request_class.handleContentChunk = handleContentChunk
    request_class.requestReceived = requestReceived


def _refuse_as_too_large(request) -> None:
    request.body_refused = True
    request.content = io.BytesIO()  # what Twisted closes with the request
    body = json.dumps({"detail": upload_limit_text(request.body_limit)}).encode()
    request.channel.transport.write(
        b"HTTP/1.1 413 Request Entity Too Large\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
    request.channel.loseConnection()


def _pass_bodies_through(request_class) -> None:
    """Daphne hands Django the raw body; Twisted would also parse a multipart body into its own
    `args` first (memory for nothing) and answer a malformed one with a bare, bodiless 400
    before Django could answer it as JSON."""
    init = request_class.__init__

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("parsePOSTFormSubmission", False)
        init(self, *args, **kwargs)

    request_class.__init__ = __init__
