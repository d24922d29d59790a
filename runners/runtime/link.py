"""One supervised control connection to one SDK runtime.

stdio mode spawns the runtime and restarts it when it exits; ws mode connects
to a separately started runtime and reconnects when the connection drops.
Either way every (re)connection repeats the handshake: ``__ping``,
``set_runtime_config`` (no context), then ``list_plugins`` with the constant
installation binding, which pins the workspace and releases plugin launch.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import logging
import os
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from langbot_plugin.entities.io.actions.enums import CommonAction, LangBotToRuntimeAction
from langbot_plugin.entities.io.context import parse_action_envelope_context
from langbot_plugin.entities.io.errors import (
    ActionCallError,
    ActionCallTimeoutError,
    ConnectionClosedError,
)
from langbot_plugin.runtime.io.connection import Connection
from langbot_plugin.runtime.io.controllers.ws.client import WebSocketClientController
from langbot_plugin.runtime.security import PLUGIN_RUNTIME_CONTROL_TOKEN_HEADER

from runners.runtime import runtime_log
from runners.runtime.actions import HostHandler
from runners.runtime.errors import LinkLost, LinkNotReady, RuntimeLinkError, ToolNotFound
from runners.runtime.host_actions import HostActions
from runners.runtime.identity import Identity
from runners.runtime.process import free_port, spawn_runtime, stop_runtime
from runners.runtime.sandbox import Sandbox
from runners.runtime.stdio import StdioConnection

logger = logging.getLogger(__name__)
runtime_logger = logging.getLogger("langbot.runtime")

RUNTIME_LOG_LINES = 500
# The runtime accepts at most 128 concurrent inbound actions per connection and
# answers "busy" beyond; queueing here turns overload into latency instead.
MAX_IN_FLIGHT = 128
# Without a deadline the runtime itself allows 300 s between streamed results.
DEFAULT_ITEM_TIMEOUT = 300.0
# A session that stayed up this long resets the restart backoff.
STABLE_SESSION_SECONDS = 10.0

StateCallback = Callable[[str, str | None], None]
# The session a tool call names (the SDK's Session: a plugin's tool may read it).
TOOL_SESSION = {"launcher_type": "person", "launcher_id": "langhost", "sender_id": "langhost"}


def _describe(exc: BaseException) -> str:
    return f"{exc.__class__.__name__}: {exc}"


def item_timeout_for(context: dict[str, Any]) -> float:
    """Seconds to wait between streamed results: the run's deadline + 1 s, else 300 s."""
    deadline_at = (context.get("runtime") or {}).get("deadline_at")
    if deadline_at is None:
        return DEFAULT_ITEM_TIMEOUT
    return max(float(deadline_at) - time.time() + 1.0, 0.001)


class RuntimeLink:
    """Owns one runtime connection; give either ``runtime_dir`` (stdio) or ``url`` (ws).

    ``runtime_dir`` becomes the runtime's cwd: it loads plugins from
    ``runtime_dir/data/plugins/<author>__<name>/``.
    """

    def __init__(self, host: HostActions, instance_id: str, *,
                 runtime_dir: str | os.PathLike[str] | None = None, url: str | None = None,
                 token: str | None = None, transfer_dir: str | os.PathLike[str] | None = None,
                 worker_policy: dict[str, Any] | None = None, ping_interval: float = 10.0,
                 ping_timeout: float = 5.0, handshake_timeout: float = 30.0,
                 backoff_initial: float = 0.5, backoff_max: float = 30.0,
                 on_state_change: StateCallback | None = None,
                 before_spawn: Callable[[], Awaitable[None]] | None = None,
                 sandbox: Sandbox | None = None):
        if (runtime_dir is None) == (url is None):
            raise ValueError("give exactly one of runtime_dir (stdio) or url (ws)")
        self.host = host
        self.identity = Identity(instance_id)
        self.mode = "ws" if url else "stdio"
        self.runtime_dir = None if runtime_dir is None else os.fspath(runtime_dir)
        self.url = url
        self.token = token
        self.transfer_dir = os.fspath(transfer_dir) if transfer_dir else self._default_transfer_dir()
        self.worker_policy = worker_policy
        self.sandbox = sandbox
        self.ping_interval = ping_interval
        self.ping_timeout = ping_timeout
        self.handshake_timeout = handshake_timeout
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.on_state_change = on_state_change
        # stdio: awaited before every runtime start (the gateway readies the plugins dir).
        self.before_spawn = before_spawn

        self.state = "down"
        self.state_reason: str | None = "not started"
        self.connected_since: float | None = None
        self.last_error: str | None = None
        self.pid: int | None = None
        self.process_group: int | None = None
        self.log_tail: collections.deque[str] = collections.deque(maxlen=RUNTIME_LOG_LINES)
        self.stopping = False
        # "author/name" of plugins whose process the current runtime reported dead (stdio only).
        self.exited_plugins: set[str] = set()
        self.sessions = 0

        self._binding = parse_action_envelope_context(self.identity.binding())
        self._slots = asyncio.Semaphore(MAX_IN_FLIGHT)
        self._ready = asyncio.Event()
        self._handler: HostHandler | None = None
        self._task: asyncio.Task[None] | None = None

    def _default_transfer_dir(self) -> str:
        # The SDK Handler would otherwise use data/temp/lbp under the host's cwd.
        if self.runtime_dir is not None:
            return os.path.join(self.runtime_dir, "data", "temp", "langhost")
        return os.path.join(tempfile.gettempdir(), f"langhost-{self.identity.instance_uuid}")

    # ---- lifecycle -------------------------------------------------------

    async def start(self) -> None:
        self.stopping = False
        if self._task is None or self._task.done():
            # A fresh context: the link outlives whatever started it (a run, a request), and
            # must not log or trace as that run for the rest of the process's life.
            self._task = asyncio.get_running_loop().create_task(
                self._supervise(), name="runtime-link", context=contextvars.Context())

    async def stop(self) -> None:
        """Close the connection; in stdio mode SIGTERM the runtime, 2 s grace, then SIGKILL."""
        task, self._task = self._task, None
        self.stopping = True
        # Cancel until it is done: an SDK call can swallow a cancellation that arrives just as
        # its answer does, and a session left running would race the next one.
        while task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=0.5)
        self._set_state("down", "stopped")

    async def wait_ready(self, timeout: float) -> None:
        if self._ready.is_set():
            return
        # asyncio.timeout, not wait_for: on 3.11 wait_for swallows a cancellation that
        # arrives as the event is set, and the caller (e.g. a discovery being stopped)
        # then runs on as if never cancelled.
        try:
            async with asyncio.timeout(timeout):
                await self._ready.wait()
        except TimeoutError:
            raise LinkNotReady(
                f"runtime link not ready after {timeout}s: {self.state} ({self.state_reason}); "
                f"last error: {self.last_error}"
            ) from None

    def status(self) -> dict[str, Any]:
        since = self.connected_since
        return {"mode": self.mode, "state": self.state, "state_reason": self.state_reason,
                "connected_since": None if since is None else datetime.fromtimestamp(
                    since, UTC).isoformat(),
                "uptime": None if since is None else time.time() - since,
                "last_error": self.last_error, "pid": self.pid, "sessions": self.sessions}

    def _set_state(self, state: str, reason: str | None) -> None:
        """Record a transition; a new reason for the same state only refines it."""
        changed = state != self.state
        self.state, self.state_reason = state, reason
        if not changed:
            return
        if state == "ready":
            self.connected_since = time.time()
            self._ready.set()
        else:
            self.connected_since = None
            self._ready.clear()
        logger.info("runtime link %s: %s (%s)", self.mode, state, reason)
        if self.on_state_change is not None:
            try:
                self.on_state_change(state, reason)
            except Exception:
                logger.exception("runtime link state callback failed")

    async def _supervise(self) -> None:
        delay = self.backoff_initial
        loop = asyncio.get_running_loop()
        while True:
            self.sessions += 1
            started = loop.time()
            self._set_state("connecting", "starting runtime" if self.mode == "stdio" else self.url)
            try:
                if self.mode == "stdio":
                    await self._stdio_session()
                else:
                    await self._ws_session()
                reason = "connection closed"
            except Exception as exc:
                reason = _describe(exc)
            # Only stop() ends a session on purpose (by cancelling this task).
            self.last_error = reason
            logger.warning("runtime link session ended: %s", reason)
            self._set_state("down", reason)
            if loop.time() - started >= STABLE_SESSION_SECONDS:
                delay = self.backoff_initial
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.backoff_max)

    async def _stdio_session(self) -> None:
        self.exited_plugins = set()
        if self.before_spawn is not None:
            await self.before_spawn()
        process = await spawn_runtime(self.runtime_dir, free_port(), self.sandbox)
        # The runtime's pid, and its process group (bubblewrap's, in a sandbox): its plugins'.
        self.pid, self.process_group = process.runtime_pid, process.pid
        reading_log = asyncio.create_task(self._read_log(process.stderr))
        try:
            connection = StdioConnection(
                process.stdout,
                process.stdin,
                process=process,
                # As the SDK's StdioClientController does for its first frame.
                reserve_first_message_decode=True,
                reserve_first_message_send=True,
            )
            await self._serve(connection)
            # The closed pipe can be seen a moment before the exit status.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await process.wait()
            if process.returncode is not None:
                raise RuntimeLinkError(f"runtime exited with code {process.returncode}")
        finally:
            await stop_runtime(process)
            self.pid = self.process_group = None
            with contextlib.suppress(Exception):
                async with asyncio.timeout(1.0):
                    await reading_log

    async def _read_log(self, stream: asyncio.StreamReader) -> None:
        """Keep the runtime's recent log lines (see `plugin_failures`) and pass them on."""
        while line := await stream.readline():
            text = line.decode(errors="replace").rstrip()
            self.log_tail.append(text)
            if exited := runtime_log.exited_plugin(text):
                self.exited_plugins.add(exited)
            # Stopping, the runtime complains that its input closed: expected, not news.
            runtime_logger.log(logging.DEBUG if self.stopping else logging.INFO, "%s", text)

    def plugin_failures(self) -> dict[str, str]:
        """`{"author/name": last error}` from the runtime's recent log (`runtime_log`)."""
        return runtime_log.plugin_failures(self.log_tail)

    async def _ws_session(self) -> None:
        failure: list[BaseException | None] = []

        async def on_failed(_controller: Any, exc: Exception | None) -> None:
            failure.append(exc)

        headers = {PLUGIN_RUNTIME_CONTROL_TOKEN_HEADER: self.token} if self.token else None
        controller = WebSocketClientController(self.url, on_failed, additional_headers=headers)
        await controller.run(self._serve)
        if failure and failure[0] is not None:
            raise failure[0]

    async def _serve(self, connection: Connection) -> None:
        """Handshake, then serve until the connection closes or stops answering pings."""
        handler = HostHandler(connection, self.host, file_storage_dir=self.transfer_dir,
                              binding=self._binding)
        receiving = asyncio.create_task(handler.run())
        pinging: asyncio.Task[None] | None = None
        reason = "connection closed"
        try:
            await self._handshake(handler)
            self._handler = handler
            self._set_state("ready", "handshake complete")
            pinging = asyncio.create_task(self._ping_forever(handler))
            await asyncio.wait({receiving, pinging}, return_when=asyncio.FIRST_COMPLETED)
            if pinging.done():
                pinging.result()  # raises the health failure
        except asyncio.CancelledError:
            reason = "stopped"
            raise
        except Exception as exc:
            reason = _describe(exc)
            raise
        finally:
            # Down before the (possibly slow) cleanup, so new calls fail fast.
            self._handler = None
            self._set_state("down", reason)
            if pinging is not None:
                pinging.cancel()
            # Reading stops first: the runtime exits when its input closes, and a read still
            # waiting would log that expected end as an error. Stopping the reader fails every
            # pending call and stream with ConnectionClosedError at once, so in-flight runs
            # end promptly instead of waiting out timeouts.
            receiving.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await receiving
            with contextlib.suppress(Exception):
                await handler.close()
            with contextlib.suppress(Exception):
                await connection.close()

    async def _handshake(self, handler: HostHandler) -> None:
        # Neither call may carry a context; this task has none bound.
        await handler.call_action(CommonAction.PING, {}, timeout=self.handshake_timeout)
        await handler.call_action(
            LangBotToRuntimeAction.SET_RUNTIME_CONFIG,
            self.identity.runtime_config(self.worker_policy),
        )
        # The first tenant-scoped call pins the workspace and releases plugin launch.
        await handler.call_action(
            LangBotToRuntimeAction.LIST_PLUGINS, {}, action_context=self._binding
        )

    async def _ping_forever(self, handler: HostHandler) -> None:
        while True:
            await asyncio.sleep(self.ping_interval)
            # Pings queue behind the in-flight limit like any call; only the
            # answer is timed, so a busy link is not mistaken for a dead one.
            async with self._slots:
                try:
                    await handler.call_action(CommonAction.PING, {}, timeout=self.ping_timeout)
                except ActionCallTimeoutError:
                    raise RuntimeLinkError(
                        f"runtime did not answer __ping within {self.ping_timeout}s"
                    ) from None

    # ---- calls -----------------------------------------------------------

    def _ready_handler(self) -> HostHandler:
        handler = self._handler
        if handler is None or self.state != "ready":
            raise LinkNotReady(f"runtime link is {self.state} ({self.state_reason})")
        return handler

    async def _call(
        self,
        action: LangBotToRuntimeAction,
        data: dict[str, Any],
        timeout: float,
        cancel_peer: bool = False,
    ):
        handler = self._ready_handler()
        async with self._slots:
            try:
                return await handler.call_action(
                    action,
                    data,
                    timeout=timeout,
                    action_context=self._binding,
                    cancel_peer_on_cancel=cancel_peer,
                )
            except ConnectionClosedError as exc:
                raise LinkLost(f"runtime connection lost during {action.value}: {exc}") from exc
            except (ActionCallError, ActionCallTimeoutError) as exc:
                raise RuntimeLinkError(f"{action.value} failed: {exc}") from exc

    async def _stream(
        self, action: LangBotToRuntimeAction, data: dict[str, Any], item_timeout: float
    ) -> AsyncIterator[dict[str, Any]]:
        handler = self._ready_handler()
        async with self._slots:
            stream = handler.call_action_generator(
                action, data, timeout=item_timeout, action_context=self._binding
            )
            try:
                # Closing this generator closes the SDK's, which sends
                # __cancel_action so the runtime cancels the plugin's task.
                async with contextlib.aclosing(stream):
                    async for item in stream:
                        yield item
            except ConnectionClosedError as exc:
                raise LinkLost(f"runtime connection lost during {action.value}: {exc}") from exc
            except ActionCallTimeoutError as exc:
                raise RuntimeLinkError(
                    f"{action.value}: nothing from the runtime for {item_timeout:.1f}s"
                ) from exc
            except ActionCallError as exc:
                raise RuntimeLinkError(f"{action.value} failed: {exc}") from exc

    async def list_runners(self, include_plugins: list[str] | None = None) -> list[dict[str, Any]]:
        """Raw runner descriptors; only enabled, initialized plugins are listed."""
        data = {} if include_plugins is None else {"include_plugins": include_plugins}
        return (await self._call(LangBotToRuntimeAction.LIST_RUNNERS, data, 15.0))["runners"]

    async def list_plugins(self) -> list[dict[str, Any]]:
        return (await self._call(LangBotToRuntimeAction.LIST_PLUGINS, {}, 15.0))["plugins"]

    async def list_tools(self, include_plugins: list[str] | None = None) -> list[dict[str, Any]]:
        """Tool component manifests (``owner`` is "author/name") of the registered plugins."""
        data = {} if include_plugins is None else {"include_plugins": include_plugins}
        return (await self._call(LangBotToRuntimeAction.LIST_TOOLS, data, 15.0))["tools"]

    async def list_commands(self, include_plugins: list[str] | None = None) -> list[dict]:
        """Command component manifests (``owner`` is "author/name") of the registered plugins."""
        data = {} if include_plugins is None else {"include_plugins": include_plugins}
        return (await self._call(LangBotToRuntimeAction.LIST_COMMANDS, data, 15.0))["commands"]

    async def execute_command(self, plugin_author: str, plugin_name: str, command_context: dict,
                              item_timeout: float) -> AsyncIterator[dict[str, Any]]:
        """Stream the command's replies (`CommandReturn` dicts). The runtime would answer
        nothing for a plugin without the command loaded: asked first, that is `ToolNotFound`."""
        plugin, name = f"{plugin_author}/{plugin_name}", command_context["command"]
        if not any(command["manifest"]["metadata"]["name"] == name
                   for command in await self.list_commands([plugin])):
            raise ToolNotFound(f"plugin {plugin} has no command '{name}' loaded")
        data = {"command_context": command_context, "include_plugins": [plugin]}
        stream = self._stream(LangBotToRuntimeAction.EXECUTE_COMMAND, data, item_timeout)
        async with contextlib.aclosing(stream):
            async for reply in stream:
                yield reply

    async def emit_event(self, plugin: str, event_context: dict, timeout: float) -> dict:
        """The event context after `plugin`'s listeners saw it (the SDK's `EventContext`
        dump), with `emitted` telling whether one of them handles the event."""
        data = {"event_context": event_context, "include_plugins": [plugin]}
        answer = await self._call(LangBotToRuntimeAction.EMIT_EVENT, data, timeout, cancel_peer=True)
        return {"emitted": bool(answer.get("emitted_plugins")),
                "event_context": answer["event_context"]}

    async def call_tool(self, plugin_author: str, plugin_name: str, tool_name: str,
                        parameters: dict[str, Any], timeout: float) -> Any:
        """The tool's response. Raises ``ToolNotFound``, or ``RuntimeLinkError`` with the
        tool's own error; past ``timeout`` (or when cancelled) the runtime is told to cancel.
        """
        plugin = f"{plugin_author}/{plugin_name}"
        # The runtime answers an unknown tool with an empty response, like a tool that
        # returned nothing: ask it first whether the plugin has the tool.
        listed = await self.list_tools([plugin])
        if not any(tool["manifest"]["metadata"]["name"] == tool_name for tool in listed):
            raise ToolNotFound(f"plugin {plugin} has no tool '{tool_name}' loaded")
        data = {
            "tool_name": tool_name,
            "tool_parameters": parameters,
            "session": TOOL_SESSION,
            "query_id": 0,
            "include_plugins": [plugin],
        }
        answer = await self._call(LangBotToRuntimeAction.CALL_TOOL, data, timeout, cancel_peer=True)
        return answer["tool_response"]

    async def plugin_action(self, action: LangBotToRuntimeAction, plugin: str,
                            data: dict[str, Any], timeout: float) -> dict[str, Any]:
        """The runtime's answer to an action of a plugin's page or knowledge engine."""
        author, name = plugin.split("/", 1)
        return await self._call(action, {"plugin_author": author, "plugin_name": name, **data},
                                timeout)

    async def list_knowledge_engines(self) -> list[dict[str, Any]]:
        answer = await self._call(LangBotToRuntimeAction.LIST_KNOWLEDGE_ENGINES, {}, 30.0)
        return answer["engines"]

    async def plugin_file(self, plugin: str, path: str, timeout: float) -> tuple[bytes, str] | None:
        """A file of the plugin's `assets/` or `components/pages/` and its type, or None."""
        author, name = plugin.split("/", 1)
        data = {"plugin_author": author, "plugin_name": name, "file_path": path}
        answer = await self._call(LangBotToRuntimeAction.GET_PLUGIN_ASSETS_FILE, data, timeout)
        if not answer.get("file_file_key"):
            return None
        handler = self._ready_handler()
        try:
            return await handler.read_local_file(answer["file_file_key"]), answer["mime_type"]
        except (OSError, ValueError) as exc:
            raise RuntimeLinkError(f"the file did not arrive: {_describe(exc)}") from exc
        finally:
            await handler.delete_local_file(answer["file_file_key"])

    async def restart_plugin(self, plugin_author: str, plugin_name: str) -> list[dict[str, Any]]:
        """Relaunch one plugin (it asks get_plugin_settings again); returns the progress items.

        The runtime waits up to 30 s for the plugin to register again.
        """
        data = {"plugin_author": plugin_author, "plugin_name": plugin_name}
        stream = self._stream(LangBotToRuntimeAction.RESTART_PLUGIN, data, 45.0)
        return [item async for item in stream]

    def run_runner(self, plugin_author: str, plugin_name: str, runner_name: str,
                   context: dict[str, Any], item_timeout: float | None = None,
                   ) -> AsyncIterator[dict[str, Any]]:
        """Stream a run's result dicts. Close it early (``aclosing``) to cancel the run.

        Holds one of the 128 in-flight slots until closed or exhausted.
        """
        data = {"plugin_author": plugin_author, "plugin_name": plugin_name,
                "runner_name": runner_name, "context": context}
        timeout = item_timeout if item_timeout is not None else item_timeout_for(context)
        return self._stream(LangBotToRuntimeAction.RUN_RUNNER, data, timeout)
