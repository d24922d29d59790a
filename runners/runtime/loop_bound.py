"""What the engine needs of the plugin runtime (`Gateway`), and a gateway bound to one event
loop, callable from any other (`LoopBoundGateway`).

The runtime link's connections, tasks and channel-layer receives belong to the loop they were
made on. `LoopBoundGateway` runs every call on that loop: directly when the caller is on it,
otherwise handed over (and a runner's results handed back one by one).
"""

import asyncio
import concurrent.futures
import contextlib
import contextvars
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from typing import Protocol, runtime_checkable

from runners.models import RunnerDescriptor

# What the SDK's page script waits for its plugin's answer.
PAGE_CALL_TIMEOUT_SECONDS = 30.0
# What LangHost asks of a plugin's knowledge engine (`Gateway.engine_call`).
ENGINE_ACTIONS = frozenset({"rag_ingest_document", "rag_delete_document", "rag_on_kb_create",
                            "rag_on_kb_delete", "retrieve_knowledge"})


@runtime_checkable
class Gateway(Protocol):
    """What the orchestrator, the admin and the commands need of the plugin runtime."""

    # The host actions of the runs it starts are answered in this process (its runtime link
    # is here), where the run's handle can write the run's row first (see `RunHandle`).
    answers_host_actions_here: bool

    async def start(self) -> None:
        """Bring up what this gateway owns (a runtime link, if any); discovery follows."""

    async def stop(self) -> None: ...

    async def discover(self, timeout: float = ...) -> list[RunnerDescriptor]:
        """Ask the runtime for its runners, store them, and return the available ones."""

    def run_runner(self, descriptor: RunnerDescriptor, context: dict,
                   item_timeout: float) -> AsyncIterator[dict]:
        """The runner's results; closing the stream cancels the runner."""

    def execute_command(self, descriptor: RunnerDescriptor, context: dict,
                        item_timeout: float) -> AsyncIterator[dict]:
        """A plugin command's run: its replies as the run's results."""

    async def emit_event(self, plugin: str, event_context: dict, timeout: float) -> dict:
        """`{emitted, event_context}`: the LangBot event context after the listeners of
        `plugin` ("author/name") saw it. Raises `RuntimeLinkError` when they failed, timed out
        or cannot be reached."""

    async def page_api(self, plugin: str, page_id: str, endpoint: str, method: str,
                       body) -> dict:
        """`{data, error}`: what a plugin's `Page` component's `handle_api` answered."""

    async def plugin_file(self, plugin: str, path: str) -> tuple[bytes, str] | None:
        """A file of a plugin's `assets/` or `components/pages/` and its media type; None
        when it has none there."""

    async def engine_call(self, plugin: str, action: str, data: dict, timeout: float) -> dict:
        """The answer of a plugin's knowledge engine to one of `ENGINE_ACTIONS`. Raises
        `RuntimeLinkError` when it failed, timed out or cannot be reached."""

    async def status(self) -> dict:
        """The runtime link's mode, state, uptime and last error."""

    async def restart_plugin(self, author: str, name: str) -> None:
        """Have the runtime relaunch the plugin, which reads its settings again; returns once
        asked. A runtime that is not running reads them when it starts."""

    async def call_tool(self, plugin_author: str, plugin_name: str, tool_name: str,
                        parameters: dict, timeout: float):
        """The plugin tool's response. Raises `ToolNotFound` (no such tool loaded) or
        `RuntimeLinkError` (the tool failed, timed out, or the link did)."""


def submit(coro, loop: asyncio.AbstractEventLoop) -> concurrent.futures.Future:
    """Run `coro` as a task on `loop` (from any thread) in a fresh context: the caller's
    asgiref executors must not follow it to a loop that outlives the caller."""
    return contextvars.Context().run(asyncio.run_coroutine_threadsafe, coro, loop)


class LoopBoundGateway:
    """Satisfies `Gateway`; every call runs on `loop`, the loop `gateway` belongs to."""

    def __init__(self, gateway: Gateway, loop: asyncio.AbstractEventLoop):
        self.gateway = gateway
        self.loop = loop
        self.answers_host_actions_here = gateway.answers_host_actions_here

    def _here(self) -> bool:
        return asyncio.get_running_loop() is self.loop

    async def _call(self, coro):
        if self._here():
            return await coro
        return await asyncio.wrap_future(submit(coro, self.loop))

    async def start(self) -> None:
        await self._call(self.gateway.start())

    async def stop(self) -> None:
        await self._call(self.gateway.stop())

    async def discover(self, *args, **kwargs) -> list[RunnerDescriptor]:
        return await self._call(self.gateway.discover(*args, **kwargs))

    async def status(self) -> dict:
        return await self._call(self.gateway.status())

    async def restart_plugin(self, author: str, name: str) -> None:
        await self._call(self.gateway.restart_plugin(author, name))

    async def call_tool(self, *args, **kwargs):
        return await self._call(self.gateway.call_tool(*args, **kwargs))

    async def emit_event(self, *args, **kwargs) -> dict:
        return await self._call(self.gateway.emit_event(*args, **kwargs))

    async def page_api(self, *args, **kwargs) -> dict:
        return await self._call(self.gateway.page_api(*args, **kwargs))

    async def plugin_file(self, *args, **kwargs) -> tuple[bytes, str] | None:
        return await self._call(self.gateway.plugin_file(*args, **kwargs))

    async def engine_call(self, *args, **kwargs) -> dict:
        return await self._call(self.gateway.engine_call(*args, **kwargs))

    def run_runner(self, descriptor: RunnerDescriptor, context: dict,
                   item_timeout: float) -> AsyncIterator[dict]:
        def open_stream():
            return self.gateway.run_runner(descriptor, context, item_timeout)

        if self._here():
            return open_stream()
        return _stream_across(open_stream, self.loop)

    def execute_command(self, descriptor: RunnerDescriptor, context: dict,
                        item_timeout: float) -> AsyncIterator[dict]:
        def open_stream():
            return self.gateway.execute_command(descriptor, context, item_timeout)

        if self._here():
            return open_stream()
        return _stream_across(open_stream, self.loop)


async def _stream_across(open_stream: Callable[[], AsyncIterator[dict]],
                         loop: asyncio.AbstractEventLoop) -> AsyncIterator[dict]:
    """The items of a stream that runs on `loop`, delivered on the caller's loop. Stopping
    early (closed, cancelled) closes the stream on its loop, which cancels the runner."""
    here = asyncio.get_running_loop()
    items: asyncio.Queue = asyncio.Queue()

    def deliver(entry: tuple) -> None:
        with contextlib.suppress(RuntimeError):  # the caller's loop is gone: nobody to tell
            here.call_soon_threadsafe(items.put_nowait, entry)

    async def pump() -> None:
        try:
            async with aclosing(open_stream()) as stream:
                async for item in stream:
                    deliver(("item", item))
        except Exception as exc:
            deliver(("error", exc))
        else:
            deliver(("end", None))

    pumping = submit(pump(), loop)
    try:
        while True:
            kind, value = await items.get()
            if kind == "item":
                yield value
            elif kind == "error":
                raise value
            else:
                return
    finally:
        pumping.cancel()
