"""The process's way to the plugin runtime: discovery, runs, status.

In the embedded default this process owns the runtime link (`LocalGateway`); with
`LANGHOST_RUNTIME_WORKER` another process does and this one asks it (`ChannelGateway`). Either
is a `Gateway`. `get_gateway()` is the process's one gateway, on the process's own loop and
callable from any (`runners.runtime.host_process`).
"""

import asyncio
import contextvars
import logging
import os
import uuid
from collections.abc import Collection
from contextlib import aclosing
from pathlib import Path

from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.db import transaction
from langbot_plugin.entities.io.actions.enums import LangBotToRuntimeAction

from runners.hostapi.host import DjangoHost
from runners.models import PluginInstallation, RunnerDescriptor
from runners.plugins import (
    command_registry,
    commands,
    engines,
    events,
    folders,
    installations,
    pages,
    registry,
    tool_registry,
)
from runners.plugins.requirements import install_requirements
from runners.runtime import liveness
from runners.runtime.host_process import host_process
from runners.runtime.link import RuntimeLink
from runners.runtime.loop_bound import ENGINE_ACTIONS, PAGE_CALL_TIMEOUT_SECONDS, Gateway, submit
from runners.runtime.sandbox import Sandbox, sandbox_for
from runners.runtime.worker import ChannelGateway

logger = logging.getLogger(__name__)

DISCOVERY_POLL_SECONDS = 0.05
DISCOVERY_TIMEOUT_SECONDS = 15.0
# Plugins start one after another: this long without one coming up, the rest are stragglers.
PLUGIN_QUIET_SECONDS = 2.5
PLUGINS_WATCH_SECONDS = 2.0
# The runtime's last log lines on its status page: why it keeps failing to start, say.
RUNTIME_LOG_LINES = 40
TOOL_CALL_TIMEOUT_SECONDS = 180.0  # what the runtime itself allows a plugin's tool
# A plugin whose process died is relaunched by the runtime: a run for it waits this long at
# most (within its own deadline) for it to come back, asking again this often.
PLUGIN_RETURN_SECONDS = 30.0
PLUGIN_RETURN_POLL_SECONDS = 0.2


def instance_id() -> str:
    """A stable id for this LangHost installation: every runtime identity derives from it."""
    path = Path(settings.DATA_DIR) / "instance_id"
    if not path.exists():
        path.write_text(str(uuid.uuid4()))
    return path.read_text().strip()


def plugin_sandbox() -> Sandbox | None:
    """The sandbox a runtime of this process runs in (`LANGHOST_PLUGIN_SANDBOX`), closed to
    LangHost's own ports (`LANGHOST_SANDBOX_CLOSED_PORTS`)."""
    return sandbox_for(settings.LANGHOST_PLUGIN_SANDBOX, settings.LANGHOST_SANDBOX_CLOSED_PORTS,
                       settings.LANGHOST_SANDBOX_HIDDEN)


class LocalGateway:
    """Owns the runtime link in this process and keeps descriptors in step with it."""

    answers_host_actions_here = True

    def __init__(self, *, plugins_dir=None, runtime_dir=None, url=None, token=None,
                 instance=None, database_ready: asyncio.Event | None = None):
        self.plugins_dir = Path(plugins_dir or settings.LANGHOST_PLUGINS_DIR)
        self.runtime_dir = Path(runtime_dir or Path(settings.DATA_DIR) / "runtime")
        self.instance_id = instance or instance_id()
        url = url if url is not None else settings.LANGHOST_RUNTIME_URL
        token = token if token is not None else settings.LANGHOST_RUNTIME_TOKEN
        link_args = {"url": url, "token": token} if url else {
            "runtime_dir": self.runtime_dir, "before_spawn": self._prepare_plugins,
            "sandbox": plugin_sandbox()}
        # Set once the database can be written (migrated). `manage.py serve` starts the runtime
        # while it migrates: the plugins are handed over at once, and recorded once it is set.
        if database_ready is None:
            database_ready = asyncio.Event()
            database_ready.set()
        self.database_ready = database_ready
        self.link = RuntimeLink(DjangoHost(self.instance_id, self.database_ready),
                                self.instance_id, on_state_change=self._on_state_change,
                                **link_args)
        self.plugins: list[dict] = []
        # What the last discovery stored: plugin runners, and the plugins that loaded.
        self.runner_ids: set[str] = set()
        self.plugin_ids: set[str] = set()
        # Set by `manage.py runtime`, as one of several runtime workers: an async callable
        # giving the runner and plugin ids the other live workers list.
        self.listed_elsewhere = None
        self._tasks: set[asyncio.Task] = set()
        self._started = False
        self._stopping = False
        self._settled = asyncio.Event()
        self._discover_lock = asyncio.Lock()
        # Plugins this gateway's discovery saw fail to load: later discoveries do not wait
        # for them (else every rediscovery, and every run waiting on one, sits out the timeout).
        self._failed_plugins: set[str] = set()
        # `{"author/name": reason}` of plugins kept from the runtime: a quarantined folder, or
        # requirements pip could not install (stdio mode only: a runtime of its own (ws)
        # loads its own plugins).
        self._held_back: dict[str, str] = {}

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        if self.database_ready.is_set():
            await sync_to_async(installations.sync_installations_sync)(
                await asyncio.to_thread(folders.scan, self.plugins_dir), self.instance_id)
        await self.link.start()
        if settings.LANGHOST_RUNTIME_REFRESH_SECONDS > 0:
            self._spawn(self._refresh_forever())
        self._spawn(self._watch_plugins_forever())

    async def stop(self) -> None:
        # A deliberate stop is not an outage: descriptors keep their availability.
        self._stopping = True
        # Cancel until they are gone: an SDK call (asyncio.wait_for on 3.11) can swallow a
        # cancellation that arrives just as its answer does, and the task then runs on.
        while pending := [task for task in self._tasks if not task.done()]:
            for task in pending:
                task.cancel()
            await asyncio.wait(pending, timeout=0.5)
        await self.link.stop()
        self._started = self._stopping = False

    async def _prepare_plugins(self) -> None:
        """Before each runtime start: install the plugins' requirements, then hand the runtime
        the folders whose requirements are met (as LangBot does, a failed one is not loaded)."""
        self.plugins_dir.mkdir(parents=True, exist_ok=True)
        self._failed_plugins = set()  # a new runtime is a new chance for every plugin to load
        found = await asyncio.to_thread(folders.scan, self.plugins_dir)
        markers = Path(settings.DATA_DIR) / "plugin-requirements"
        errors = {folder.plugin_id: folder.problem for folder in found if folder.problem}
        for folder in found:
            # One at a time: pip runs take turns for the network and the CPU.
            if not folder.problem and (error := await install_requirements(
                    folder.path, markers, self.link.sandbox)):
                errors[folder.plugin_id] = error
        for plugin_id, error in errors.items():
            logger.warning("plugin %s is not loaded: %s", plugin_id, error)
        self._held_back = errors
        if self.database_ready.is_set():
            await self._record_installations(found, errors)
        else:
            self._spawn(self._record_installations(found, errors))
        await asyncio.to_thread(folders.link_into_runtime_dir, self.runtime_dir,
                                [folder.path for folder in found
                                 if folder.plugin_id not in errors])

    async def _record_installations(self, found: list[folders.PluginFolder],
                                    errors: dict[str, str]) -> None:
        await self.database_ready.wait()
        await sync_to_async(installations.sync_installations_sync)(found, self.instance_id)
        await sync_to_async(installations.record_held_back_sync)(errors)

    def _spawn(self, coro) -> None:
        # A fresh context: a task spawned from a request (admin -> async_to_sync) would
        # otherwise inherit that request's asgiref executor and fail every sync_to_async
        # ("CurrentThreadExecutor already quit") once the request has ended.
        task = asyncio.get_running_loop().create_task(coro, context=contextvars.Context())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _on_state_change(self, state: str, reason: str | None) -> None:
        self._settled.clear()
        if self._stopping:
            return
        if state == "ready":
            self._spawn(self.discover())
        elif state == "down":
            self._spawn(self.withdraw())

    async def withdraw(self) -> None:
        """This runtime's runners and tools are no longer offered (those another runtime
        worker lists still are)."""
        runners_elsewhere, plugins_elsewhere = await self._elsewhere()
        await registry.mark_plugins_unavailable(runners_elsewhere)
        await tool_registry.mark_tools_unavailable(plugins_elsewhere)
        await command_registry.mark_commands_unavailable(plugins_elsewhere)

    async def _elsewhere(self) -> tuple[Collection[str], Collection[str]]:
        return await self.listed_elsewhere() if self.listed_elsewhere else ((), ())

    # --- discovery -------------------------------------------------------------------------

    async def discover(self, timeout: float = DISCOVERY_TIMEOUT_SECONDS) -> list[RunnerDescriptor]:
        """Poll `list_plugins` until every enabled plugin loaded, then store its runners and
        tools.

        The runtime never says it is ready, and plugins register one by one after connect.
        """
        await self.start()
        async with self._discover_lock:
            await self.link.wait_ready(timeout)
            await self.database_ready.wait()
            loop = asyncio.get_running_loop()
            give_up = loop.time() + timeout
            expected = await sync_to_async(self._expected_plugins)()
            loaded: set[str] = set()
            progressed = loop.time()
            while True:
                plugins = await self.link.list_plugins()
                # A plugin the runtime lists initialized has its runners and tools listed from
                # then on, whether it has any or not. A plugin whose process the runtime saw
                # die is not waited for (the runtime keeps retrying it; later discoveries list
                # it if it recovers), nor is one that hangs: once one came up and no other for
                # PLUGIN_QUIET_SECONDS, what loaded is listed and the rest wait for the next
                # discovery.
                now_loaded = {_plugin_id(plugin) for plugin in plugins
                              if plugin.get("status") == "initialized"}
                if now_loaded - loaded:
                    loaded, progressed = loaded | now_loaded, loop.time()
                if (expected - self.link.exited_plugins <= loaded or loop.time() > give_up
                        or (loaded and loop.time() - progressed > PLUGIN_QUIET_SECONDS)):
                    break
                await asyncio.sleep(DISCOVERY_POLL_SECONDS)
            runners = await self.link.list_runners()
            tools = await self.link.list_tools()
            plugin_commands = await self.link.list_commands()
            self.plugins = plugins
            listed = {f"{raw['plugin_author']}/{raw['plugin_name']}" for raw in runners}
            runners_elsewhere, plugins_elsewhere = await self._elsewhere()
            stored = await registry.store_discovered(runners, runners_elsewhere)
            self.runner_ids = {descriptor.pk for descriptor in stored}
            self.plugin_ids = loaded
            await tool_registry.store_discovered_tools(tools, plugins_elsewhere)
            await command_registry.store_discovered_commands(plugin_commands, plugins_elsewhere)
            engine_capabilities = {engine["plugin_id"]: engine.get("capabilities") or []
                                   for engine in await self.link.list_knowledge_engines()} \
                if any(engines.has_engine(plugin) for plugin in plugins) else {}
            await sync_to_async(self._record_plugin_status)(listed, plugins_elsewhere,
                                                            engine_capabilities)
            self._settled.set()
            return stored

    def _expected_plugins(self) -> set[str]:
        """Enabled plugins whose folders exist: discovery waits for them (up to its timeout),
        but for those it saw fail."""
        return self._enabled_plugins() - self._failed_plugins

    def _enabled_plugins(self) -> set[str]:
        """Enabled plugins whose folders exist and were handed to the runtime."""
        rows = installations.sync_installations_sync(folders.scan(self.plugins_dir), self.instance_id)
        return {row.plugin_id for row in rows if row.enabled} - self._held_back.keys()

    def _record_plugin_status(self, listed: set[str], loaded_elsewhere: Collection[str] = (),
                              engine_capabilities: dict | None = None) -> None:
        """`engine_capabilities`: what the runtime says its knowledge engines can, by plugin."""
        engine_capabilities = engine_capabilities or {}
        by_id = {_plugin_id(plugin): plugin for plugin in self.plugins}
        failures = self.link.plugin_failures()
        failed = set()
        with transaction.atomic():  # one discovery's statuses are stored together or not at all
            for installation in PluginInstallation.objects.all():
                plugin = by_id.get(installation.plugin_id)
                if not installation.enabled:
                    status, error = "disabled", ""
                elif installation.plugin_id in self._held_back:
                    status, error = "failed", self._held_back[installation.plugin_id]
                    failed.add(installation.plugin_id)
                elif plugin is not None:
                    status = plugin.get("status") or "listed"
                    error = "" if installation.plugin_id in listed or status == "initialized" else (
                        installation.last_error
                    )
                elif installation.plugin_id in loaded_elsewhere:
                    continue  # another runtime worker has it: its status is that worker's
                else:
                    status = "failed"
                    error = failures.get(installation.plugin_id) or (
                        "The runtime did not load this plugin; see the runtime log for its reason.")
                    failed.add(installation.plugin_id)
                fields = {"status": status, "last_error": error}
                if plugin is not None:
                    fields.update(listens_to_events=events.has_listener(plugin),
                                  pages=pages.declared(plugin),
                                  knowledge_engine=engines.declared(
                                      plugin, engine_capabilities.get(installation.plugin_id)))
                if any(getattr(installation, name) != value for name, value in fields.items()):
                    for name, value in fields.items():
                        setattr(installation, name, value)
                    installation.save(update_fields=[*fields, "updated_at"])
        self._failed_plugins = failed
        events.forget_listening_plugins()

    async def restart_runtime(self) -> None:
        """Stop the runtime and start it again: it loads the plugin folders as they are now."""
        await self.link.stop()
        self._settled.clear()
        await self.link.start()

    async def _watch_plugins_forever(self) -> None:
        """A plugin folder added, removed, fixed or broken is loaded (or quarantined) by a
        fresh runtime, without restarting LangHost; not while runs are in flight, which the
        restart would end."""
        seen = await asyncio.to_thread(folders.signature, self.plugins_dir)
        while True:
            await asyncio.sleep(PLUGINS_WATCH_SECONDS)
            now = await asyncio.to_thread(folders.signature, self.plugins_dir)
            if now != seen and not host_process().active_runs and self.link.mode == "stdio":
                logger.info("plugin folders changed: restarting the runtime")
                seen = now
                await self.restart_runtime()

    async def _refresh_forever(self) -> None:
        while True:
            await asyncio.sleep(settings.LANGHOST_RUNTIME_REFRESH_SECONDS)
            if self.link.state == "ready":
                try:
                    await liveness.recycle_db_connections()
                    await self.discover()
                except Exception:
                    logger.exception("periodic runner discovery failed")

    # --- runs ------------------------------------------------------------------------------

    async def _wait_settled(self) -> None:
        """A runtime that just (re)connected lists its plugins only once they registered again."""
        await self.start()
        try:
            async with asyncio.timeout(DISCOVERY_TIMEOUT_SECONDS):
                await self._settled.wait()
        except TimeoutError:
            raise RuntimeError(f"the runtime's plugins did not settle within "
                               f"{DISCOVERY_TIMEOUT_SECONDS:.0f}s ({self.link.state}: "
                               f"{self.link.state_reason})") from None

    async def run_runner(self, descriptor: RunnerDescriptor, context: dict, item_timeout: float):
        """The runner's results. A plugin expected here (enabled, its folder present, handed to
        the runtime) but missing now (its process died, and the runtime is relaunching it) is waited
        for, up to PLUGIN_RETURN_SECONDS within `item_timeout`: the runtime says so before the
        runner sent anything (the plugin is not there, or its connection closed at once)."""
        await self._wait_settled()
        loop = asyncio.get_running_loop()
        give_up = loop.time() + min(item_timeout, PLUGIN_RETURN_SECONDS)
        while True:
            stream = self.link.run_runner(descriptor.plugin_author, descriptor.plugin_name,
                                          descriptor.runner_name, context, item_timeout)
            async with aclosing(stream):
                first = await anext(stream, None)
                if (_plugin_missing(first) and loop.time() < give_up
                        and f"{descriptor.plugin_author}/{descriptor.plugin_name}"
                        in await sync_to_async(self._enabled_plugins)()):
                    await asyncio.sleep(PLUGIN_RETURN_POLL_SECONDS)
                    continue
                if first is not None:
                    yield first
                async for item in stream:
                    yield item
                return

    async def execute_command(self, descriptor: RunnerDescriptor, context: dict,
                              item_timeout: float):
        """A command run's results (`runners.plugins.commands`): the command's replies."""
        await self._wait_settled()
        replies = self.link.execute_command(descriptor.plugin_author, descriptor.plugin_name,
                                            commands.execute_context(context), item_timeout)
        async with aclosing(replies):
            async for result in commands.as_results(context["run_id"], replies):
                yield result

    async def call_tool(self, plugin_author: str, plugin_name: str, tool_name: str,
                        parameters: dict, timeout: float = TOOL_CALL_TIMEOUT_SECONDS):
        """The plugin tool's response. Raises `ToolNotFound` (the runtime has no such tool
        loaded) or `RuntimeLinkError` (the tool failed, timed out, or the link did)."""
        await self._wait_settled()
        return await self.link.call_tool(plugin_author, plugin_name, tool_name, parameters,
                                         timeout)

    async def emit_event(self, plugin: str, event_context: dict, timeout: float) -> dict:
        await self._wait_settled()
        return await self.link.emit_event(plugin, event_context, timeout)

    async def page_api(self, plugin: str, page_id: str, endpoint: str, method: str,
                       body) -> dict:
        await self._wait_settled()
        return await self.link.plugin_action(
            LangBotToRuntimeAction.PAGE_API, plugin,
            {"page_id": page_id, "endpoint": endpoint, "method": method, "body": body},
            PAGE_CALL_TIMEOUT_SECONDS)

    async def engine_call(self, plugin: str, action: str, data: dict, timeout: float) -> dict:
        if action not in ENGINE_ACTIONS:
            raise ValueError(f"{action} is not an action of a knowledge engine")
        await self._wait_settled()
        return await self.link.plugin_action(LangBotToRuntimeAction(action), plugin, data,
                                             timeout)

    async def plugin_file(self, plugin: str, path: str) -> tuple[bytes, str] | None:
        await self._wait_settled()
        return await self.link.plugin_file(plugin, path, PAGE_CALL_TIMEOUT_SECONDS)

    async def restart_plugin(self, author: str, name: str) -> None:
        # The relaunch and the rediscovery after it run in the background (kept, and stopped
        # with the gateway), so the admin that asked stays responsive.
        if self._started:
            self._spawn(self._restart_plugin(author, name))

    async def _restart_plugin(self, author: str, name: str) -> None:
        await self.link.wait_ready(DISCOVERY_TIMEOUT_SECONDS)
        await self.link.restart_plugin(author, name)
        self._failed_plugins.discard(f"{author}/{name}")  # a restart is a new chance to load
        await self.discover()

    async def status(self) -> dict:
        return {**self.link.status(), "log_tail": list(self.link.log_tail)[-RUNTIME_LOG_LINES:],
                "instance_id": self.instance_id,
                "plugins_dir": str(self.plugins_dir), "discovery_settled": self._settled.is_set(),
                "pid_self": os.getpid()}


def require_runner_sync(runner_id: str) -> RunnerDescriptor:
    """From sync code (a view): the available descriptor, asking the runtime once on a miss.

    Raises `registry.RunnerNotFound`.
    """
    if cached := registry.cached_descriptor(runner_id):
        return cached  # no hop to the loop and back

    async def lookup():
        return await registry.get_descriptor(runner_id, get_gateway().discover)

    return async_to_sync(lookup)()


def apply_plugin_settings(author: str, name: str) -> None:
    """From sync code (admin): have the runtime restart a plugin with its settings.

    Returns at once; the restart and the rediscovery after it run in the background.
    """
    async_to_sync(get_gateway().restart_plugin)(author, name)


# What the runtime answers, before starting anything, for a plugin it is relaunching.
PLUGIN_AWAY_CODES = {"runner.plugin_not_found", "runner.plugin_not_initialized"}
# ... or, when it has not yet seen the plugin's process die, its first and only result.
PLUGIN_GONE_CODE, PLUGIN_GONE_ERROR = "runner.forward_exception", "Connection closed"


def _plugin_missing(result: dict | None) -> bool:
    """Whether the runtime answered a run with "that plugin is not (yet) there": it is not
    loaded, or its connection closed before the runner sent anything."""
    if not isinstance(result, dict) or result.get("type") != "run.failed":
        return False
    data = result.get("data") or {}
    return data.get("code") in PLUGIN_AWAY_CODES or (
        data.get("code") == PLUGIN_GONE_CODE and result.get("sequence") in (None, 1)
        and PLUGIN_GONE_ERROR in str(data.get("error")))


def _plugin_id(plugin: dict) -> str:
    """`author/name` of one `list_plugins` entry (its raw manifest's metadata)."""
    metadata = ((plugin.get("manifest") or {}).get("manifest") or {}).get("metadata") or {}
    return f"{metadata.get('author')}/{metadata.get('name')}"


_starting = None


def start_in_background() -> None:
    """Start this process's gateway and discover its runners, once, without waiting: the
    admin and the API list plugin runners as soon as the runtime has them."""
    global _starting
    if _starting is None:
        _starting = submit(get_gateway().discover(), host_process().loop)
        _starting.add_done_callback(_log_start_failure)


def _log_start_failure(started) -> None:
    if not started.cancelled() and started.exception() is not None:
        logger.warning("runtime start failed: %s", started.exception())


def get_gateway() -> Gateway:
    """This process's gateway, whichever loop or thread asks (made, not started, on first use).

    With `LANGHOST_RUNTIME_WORKER` set, another process owns the runtime (`manage.py runtime`)
    and this one reaches it through the Channels layer.
    """
    return host_process().gateway(
        ChannelGateway if settings.LANGHOST_RUNTIME_WORKER else LocalGateway)
