"""MCP servers' tools through the official `mcp` SDK: one open session per server per process.

A session opens by listing the server's tools, then serves every call to that server, from
whichever loop: it lives on the process's own loop (`host_process().loop`). That loop's thread
lasts as long as the process, which a stdio server's guard needs: `die_with_parent.py` has the
kernel kill the server when the thread that started it ends, so with LangHost, even SIGKILLed.
On an orderly stop the sessions close (`atexit`): the SDK closes the server's stdin, then
terminates its process group.

A session that dies (the child exited, the connection dropped) fails the calls in flight and
is reopened by the next call. Opening again after a failed opening waits out a backoff (1 s,
doubling up to 60 s) unless an operator asks for it (`list_tools(refresh=True)`); an edited
server opens at once.
"""

import asyncio
import atexit
import contextlib
import logging
import math
import os
import shutil
import sys
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
from django.db.models.signals import post_delete, post_save
from mcp import Client, MCPError, StdioServerParameters
from mcp import types as mcp_types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from runners.models import McpServer
from runners.runtime.host_process import host_process
from runners.runtime.loop_bound import submit
from runners.tools import mcp_servers
from runners.tools.errors import ToolError
from runners.tools.stderr_tail import StderrTail

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT = 30.0  # seconds to start or reach a server and list its tools
CALL_TIMEOUT = 60.0
CLOSE_TIMEOUT = 10.0  # then the session is cancelled; the SDK still kills a stdio server
BACKOFF_FIRST, BACKOFF_MAX = 1.0, 60.0
LIST_PAGES_MAX = 100  # a server whose tool list never ends cannot hang a refresh
# The SDK's own HTTP timeouts: a response stream may stay open a while.
HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
DIE_WITH_PARENT = Path(__file__).with_name("die_with_parent.py")


@dataclass(frozen=True)
class ServerSpec:
    """What a session is opened from; a server whose spec changed (an edit) gets a new one."""

    key: str
    name: str
    transport: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    url: str = ""
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)


def spec_of(server: McpServer) -> ServerSpec:
    if not server.enabled:
        raise ToolError(f"MCP server '{server.name}' is disabled.")
    return ServerSpec(
        key=str(server.pk), name=server.name, transport=server.transport,
        command=server.command, args=tuple(str(arg) for arg in server.args),
        env=tuple(sorted(mcp_servers.env(server).items())), url=server.url,
        headers=tuple(sorted(mcp_servers.headers(server).items())))


# --- one session -------------------------------------------------------------------------------

class _WatchedReadStream:
    """The transport's read stream, telling when it ends: the server is gone."""

    def __init__(self, stream, on_end):
        self._stream = stream
        self._on_end = on_end

    def __getattr__(self, name):  # what else the SDK reads of it (`last_context`)
        return getattr(self._stream, name)

    async def receive(self):
        try:
            return await self._stream.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._on_end()
            raise

    def __aiter__(self):
        return self

    async def __anext__(self):
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self):
        await self._stream.aclose()

    async def __aenter__(self):
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc_info):
        return await self._stream.__aexit__(*exc_info)


def _stdio_parameters(spec: ServerSpec) -> StdioServerParameters:
    env = dict(spec.env)
    # The SDK hands the server LangHost's PATH unless the server's env sets one.
    command = shutil.which(spec.command, path=env.get("PATH", os.environ.get("PATH")))
    if command is None:
        raise ToolError(f"command not found: {spec.command}")
    args = list(spec.args)
    if sys.platform.startswith("linux"):
        command, args = sys.executable, ["-I", str(DIE_WITH_PARENT), str(os.getpid()),
                                         command, *args]
    return StdioServerParameters(command=command, args=args, env=env or None)


@contextlib.asynccontextmanager
async def _transport(spec: ServerSpec, on_end, stderr: StderrTail | None):
    async with contextlib.AsyncExitStack() as stack:
        errlog = None
        if spec.transport == McpServer.Transport.STDIO:
            parameters = _stdio_parameters(spec)
            errlog = await stack.enter_async_context(stderr.pipe())
            streams = stdio_client(parameters, errlog=errlog)
        else:
            http = await stack.enter_async_context(
                httpx2.AsyncClient(headers=dict(spec.headers), timeout=HTTP_TIMEOUT))
            streams = streamable_http_client(spec.url, http_client=http)
        read_stream, write_stream = await stack.enter_async_context(streams)
        if errlog is not None:
            errlog.close()  # the child has its own copy: its stderr ends when it does
        yield _WatchedReadStream(read_stream, on_end), write_stream


class _Session:
    """One open session: a task holds the SDK's client open until `close()` (its transport's
    task groups and cancel scopes must enter and exit in one task)."""

    def __init__(self, spec: ServerSpec):
        self.spec = spec
        self.client: Client | None = None
        self.tools: list[dict] = []
        self.alive = True
        self.stderr: StderrTail | None = None  # a stdio server's, once opening
        self._closing = asyncio.Event()
        self._scope: anyio.CancelScope | None = None
        self._task: asyncio.Task | None = None

    async def open(self) -> None:
        """Start or reach the server and list its tools; raises what failed."""
        opened = asyncio.get_running_loop().create_future()
        if self.spec.transport == McpServer.Transport.STDIO:
            self.stderr = StderrTail(self.spec.name)
        self._task = asyncio.create_task(self._hold(opened), name=f"mcp:{self.spec.name}")
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT):
                await opened
                self.tools = await self.list_tools()
        except BaseException:
            await self.close()
            raise

    async def _hold(self, opened: asyncio.Future) -> None:
        try:
            with anyio.CancelScope() as self._scope:
                async with Client(_transport(self.spec, self._ended, self.stderr),
                                  cache=None) as client:
                    self.client = client
                    if not opened.done():
                        opened.set_result(None)
                    await self._closing.wait()
        except Exception as exc:
            if not opened.done():
                opened.set_exception(exc)
            else:
                logger.debug("MCP server %s: session ended: %s", self.spec.name, _reason(exc))
        finally:
            self.alive = False
            if not opened.done():  # cancelled while connecting
                opened.set_exception(ToolError("the session closed while opening"))

    def _ended(self) -> None:
        self.alive = False

    async def list_tools(self) -> list[dict]:
        tools, cursor = [], None
        for _ in range(LIST_PAGES_MAX):
            page = await self.client.list_tools(cursor=cursor)
            tools += [{"name": tool.name, "description": tool.description or "",
                       "inputSchema": tool.input_schema} for tool in page.tools]
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    async def close(self) -> None:
        self.alive = False
        self._closing.set()
        if self._task is None:
            return
        if self.client is None and self._scope is not None:
            self._scope.cancel()  # still connecting: nothing to close politely
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CLOSE_TIMEOUT):
                await asyncio.shield(self._task)
                return
        if self._scope is not None:
            self._scope.cancel()
        await asyncio.shield(self._task)


# --- the sessions of a process -----------------------------------------------------------------

@dataclass
class _Server:
    """A server's place in a registry: its session and how its last openings went."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    session: _Session | None = None
    spec: ServerSpec | None = None
    failures: int = 0
    retry_at: float = 0.0
    error: str = ""


class McpSessions:
    """Open sessions to MCP servers, living on `loop`; usable from any loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self._servers: dict[str, _Server] = {}

    async def _on_loop(self, coro: Coroutine) -> Any:
        if asyncio.get_running_loop() is self.loop:
            return await coro
        return await asyncio.wrap_future(submit(coro, self.loop))

    async def list_tools(self, spec: ServerSpec, refresh: bool = False) -> list[dict]:
        """The server's tools as listed when its session opened; `refresh` lists them again
        (and opens the session without waiting out a backoff)."""
        return await self._on_loop(self._list_tools(spec, refresh))

    async def call_tool(self, spec: ServerSpec, name: str, arguments: dict,
                        timeout: float = CALL_TIMEOUT) -> dict:
        """Call tool `name`: `{"text", "structuredContent"?, "content"?}` (see `_answer`).

        Raises `ToolError`: the tool answered `isError` (its text), or the server failed it.
        """
        return await self._on_loop(self._call_tool(spec, name, arguments, timeout))

    async def discard(self, key: str) -> None:
        """Close the session of server `key` (deleted or disabled), if open."""
        await self._on_loop(self._discard(key))

    async def close(self) -> None:
        """Close every session (a stdio server's process ends with it)."""
        await self._on_loop(self._close())

    async def _session(self, spec: ServerSpec, force: bool) -> tuple[_Session, bool]:
        """The server's open session, opened now if needed (then `True`)."""
        server = self._servers.setdefault(spec.key, _Server())
        async with server.lock:
            if spec != server.spec:  # new, or edited: try at once
                server.spec, server.failures, server.retry_at = spec, 0, 0.0
            session = server.session
            if session is not None and session.alive and session.spec == spec:
                return session, False
            server.session = None
            if session is not None:
                await session.close()
            wait = server.retry_at - time.monotonic()
            if wait > 0 and not force:
                raise ToolError(f"MCP server '{spec.name}' is unavailable ({server.error}); "
                                f"next try in {math.ceil(wait)} s.")
            session = _Session(spec)
            try:
                await session.open()
            except Exception as exc:
                server.failures += 1
                server.retry_at = time.monotonic() + min(
                    BACKOFF_FIRST * 2 ** (server.failures - 1), BACKOFF_MAX)
                server.error = _reason(exc) + (session.stderr.note() if session.stderr else "")
                raise ToolError(f"MCP server '{spec.name}' could not be reached: "
                                f"{server.error}") from exc
            server.session, server.failures, server.retry_at, server.error = session, 0, 0.0, ""
            return session, True

    async def _list_tools(self, spec: ServerSpec, refresh: bool) -> list[dict]:
        session, opened = await self._session(spec, force=refresh)
        if refresh and not opened:
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT):
                    session.tools = await session.list_tools()
            except TimeoutError:
                raise ToolError(f"MCP server '{spec.name}' did not list its tools within "
                                f"{CONNECT_TIMEOUT:g} s.") from None
            except Exception as exc:
                raise _failure(session, exc, "listing its tools") from exc
        return list(session.tools)

    async def _call_tool(self, spec: ServerSpec, name: str, arguments: dict,
                         timeout: float) -> dict:
        try:
            async with asyncio.timeout(timeout):
                session, _ = await self._session(spec, force=False)
                try:
                    result = await session.client.call_tool(name, arguments)
                except Exception as exc:
                    raise _failure(session, exc, f"calling '{name}'") from exc
        except TimeoutError:
            raise ToolError(f"MCP server '{spec.name}' did not answer '{name}' within "
                            f"{timeout:g} s.") from None
        if result.is_error:
            raise ToolError(_text(result) or f"Tool '{name}' failed without saying why.")
        return _answer(result)

    async def _discard(self, key: str) -> None:
        server = self._servers.pop(key, None)
        if server is not None and server.session is not None:
            await server.session.close()

    async def _close(self) -> None:
        await asyncio.gather(*(self._discard(key) for key in list(self._servers)))


def _connection_lost(exc: Exception) -> bool:
    if isinstance(exc, MCPError):
        # "Session terminated": a Streamable HTTP server that no longer knows the session.
        return exc.code == mcp_types.CONNECTION_CLOSED or exc.message == "Session terminated"
    return True  # the transport itself failed (HTTP, pipes)


def _failure(session: _Session, exc: Exception, doing: str) -> ToolError:
    """The ToolError for a request that failed; a lost connection retires the session, and the
    next request opens a new one."""
    name = session.spec.name
    if _connection_lost(exc):
        session.alive = False
        return ToolError(f"MCP server '{name}' lost its connection while {doing}: "
                         f"{_reason(exc)}. It restarts on the next call.")
    return ToolError(f"MCP server '{name}' refused {doing}: {_reason(exc)}")


def _reason(exc: BaseException) -> str:
    """What went wrong, in a line: the first real error inside task groups' exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return f"no answer within {CONNECT_TIMEOUT:g} s"
    if isinstance(exc, MCPError):
        if exc.code == mcp_types.CONNECTION_CLOSED:
            return "the server closed the connection"
        return exc.message
    return str(exc) or type(exc).__name__


def _text(result: mcp_types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content
                     if isinstance(block, mcp_types.TextContent))


def _answer(result: mcp_types.CallToolResult) -> dict:
    """A tool's result as JSON: its text parts joined, its structured content if any, and
    its other parts (images, resources) as MCP sends them."""
    answer: dict[str, Any] = {"text": _text(result)}
    if result.structured_content is not None:
        answer["structuredContent"] = result.structured_content
    others = [block.model_dump(mode="json", by_alias=True, exclude_none=True)
              for block in result.content if not isinstance(block, mcp_types.TextContent)]
    if others:
        answer["content"] = others
    return answer


# --- this process's sessions -------------------------------------------------------------------

_process_sessions: McpSessions | None = None
_process_lock = threading.Lock()


def sessions() -> McpSessions:
    """This process's sessions, on its own loop; closed when the process exits."""
    global _process_sessions
    with _process_lock:
        if _process_sessions is None:
            process = host_process()
            _process_sessions = McpSessions(process.loop)
            # A server stopping closes them before its loop stops; else the process's exit.
            process.close_on_stop(_process_sessions.close)
            atexit.register(_close_at_exit, _process_sessions)
        return _process_sessions


def _close_at_exit(registry: McpSessions) -> None:
    if not registry.loop.is_running():  # stopped (the server closed them first): nothing
        return                          # would ever run what is submitted to it
    with contextlib.suppress(Exception):
        submit(registry.close(), registry.loop).result(timeout=CLOSE_TIMEOUT)


async def list_tools(server: McpServer, refresh: bool = False) -> list[dict]:
    """The tools of `server`: `[{name, description, inputSchema}]`. Raises `ToolError`."""
    return await sessions().list_tools(spec_of(server), refresh=refresh)


async def call_tool(server: McpServer, name: str, arguments: dict,
                    timeout: float = CALL_TIMEOUT) -> dict:
    """Call tool `name` of `server` (see `McpSessions.call_tool`). Raises `ToolError`."""
    return await sessions().call_tool(spec_of(server), name, arguments, timeout)


def _discard_soon(server: McpServer) -> None:
    """A deleted or disabled server's session closes now, in the background."""
    if _process_sessions is not None:
        submit(_process_sessions.discard(str(server.pk)), _process_sessions.loop)


def _on_saved(sender, instance: McpServer, **kwargs) -> None:
    if not instance.enabled:
        _discard_soon(instance)


def _on_deleted(sender, instance: McpServer, **kwargs) -> None:
    _discard_soon(instance)


# Connected here: sessions exist only once this module is imported.
post_save.connect(_on_saved, sender=McpServer, dispatch_uid="mcp-session-disabled")
post_delete.connect(_on_deleted, sender=McpServer, dispatch_uid="mcp-session-deleted")
