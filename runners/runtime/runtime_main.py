"""Start the SDK's plugin runtime (`rt`, its own CLI) the way LangHost runs it.

- **Loopback only.** The SDK binds its WebSocket servers to 0.0.0.0 and answers `/healthz` on
  them to anyone. LangHost drives the runtime over stdio and its plugin processes reach it
  over loopback, so here every server binds 127.0.0.1 and `/healthz` goes through the
  server's authentication like any other request.
- **LangHost's own ports closed** (in bubblewrap, when the host names them in
  `LANGHOST_CLOSED_PORTS`): no TCP connection to them from the runtime or any plugin
  (`confine.close_ports`, Landlock).
- **Each plugin in its own sandbox** (when the host describes one in
  `LANGHOST_PLUGIN_CONFINEMENT`, `sandbox.py`): a plugin sees the system and Python read-only
  and its own folder writable, neither the runtime's dir nor the other plugins' folders; it
  has no capability and its own pid namespace.
- **Each plugin's log is its own**: its stderr lines reach the runtime's log prefixed with
  `[plugin <author>__<name>]`, so the host can tell whose error a line is.
- **Crash loops stop**: after `LANGHOST_PLUGIN_MAX_CRASHES` exits in a row, each within the
  SDK's stable window of its start, the runtime stops restarting the plugin and says so.
- **The host knows who asks**: the SDK forwards the knowledge, vector, file and parser
  actions without naming the calling plugin (it names it for the run API); here they carry
  its `caller_plugin_identity` too, taken from the plugin's own connection, so the host can
  keep each plugin's vector collections its own.

Run by path (`python runtime_main.py rt …`), the SDK unmodified on disk.
"""

import asyncio
import contextlib
import json
import os
import sys

# `confine` and `sandbox` lie beside this file, which runs by path.
from confine import close_ports
from langbot_plugin.cli import main
from langbot_plugin.entities.io.actions.enums import PluginToRuntimeAction
from langbot_plugin.runtime.io.controllers.stdio import client
from langbot_plugin.runtime.io.controllers.ws import server
from langbot_plugin.runtime.io.handlers import plugin as plugin_handler
from langbot_plugin.runtime.plugin import mgr
from sandbox import CLOSED_PORTS_VARIABLE, PLUGIN_SANDBOX_VARIABLE, Sandbox

LOOPBACK = "127.0.0.1"
_described = os.environ.pop(PLUGIN_SANDBOX_VARIABLE, "")
PLUGIN_SANDBOX = Sandbox.for_plugins(_described) if _described else None
MAX_CRASHES = int(os.environ.pop("LANGHOST_PLUGIN_MAX_CRASHES", "5"))
_init = server.WebSocketServerController.__init__
_launch_plugin = mgr.PluginManager.launch_plugin
_init_plugin_handler = plugin_handler.PluginConnectionHandler.__init__
CALLER_NAMED_ACTIONS = tuple(PluginToRuntimeAction(name) for name in (
    "vector_upsert", "vector_search", "vector_delete", "vector_list",
    "get_knowledge_file_stream", "list_parsers", "invoke_parser", "list_knowledge_bases",
    "retrieve_knowledge", "list_pipeline_knowledge_bases", "retrieve_knowledge_base"))
_crashes: dict[str, int] = {}  # plugin path: exits in a row, each soon after its start


def _init_on_loopback(self, port, *, host=LOOPBACK, **options):
    _init(self, port, host=LOOPBACK, **options)


def _no_public_health(connection, request, health_snapshot_provider=None):
    return None  # not answered before authentication: a request without credentials gets 401


async def _relay(stream: asyncio.StreamReader, prefix: str) -> None:
    while line := await stream.readline():
        sys.stderr.write(f"{prefix} {line.decode(errors='replace').rstrip()}\n")
    sys.stderr.flush()


class PluginProcess(client.StdioClientController):
    """A plugin's process, confined when the host asks, its stderr relayed with its name."""

    def __init__(self, command, args, env, working_dir=".", **options):
        options["capture_stderr"] = True
        self.prefix = f"[plugin {os.path.basename(os.path.normpath(working_dir))}]"
        if PLUGIN_SANDBOX is not None:
            confined = PLUGIN_SANDBOX.plugin_argv(working_dir)
            command, args = confined[0], [*confined[1:], command, *args]
        super().__init__(command, args, env, working_dir, **options)

    async def run(self, new_connection_callback):
        relays = []

        async def relaying(connection):
            relays.append(asyncio.create_task(_relay(self.process.stderr, self.prefix)))
            await new_connection_callback(connection)

        try:
            await super().run(relaying)
        finally:
            # The process is gone: its last lines (a traceback) are in the pipe, or never come.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.gather(*relays), timeout=5)


async def _launch_until_it_keeps_crashing(self, plugin_path: str):
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        return await _launch_plugin(self, plugin_path)
    finally:
        wanted = not self._shutting_down and plugin_path in self._desired_plugin_paths
        stable = loop.time() - started >= mgr._PLUGIN_STABLE_WINDOW_SEC
        _crashes[plugin_path] = _crashes.get(plugin_path, 0) + 1 if wanted and not stable else 0
        if _crashes[plugin_path] >= MAX_CRASHES:
            name = os.path.basename(os.path.normpath(plugin_path))
            sys.stderr.write(f"[plugin {name}] stopped after {MAX_CRASHES} crashes in a row\n")
            sys.stderr.flush()
            # From the plugin's own supervisor task: it stops wanting the plugin, no cancel.
            await self.stop_plugin_supervisor(plugin_path)


def _init_naming_callers(self, *args, **kwargs):
    _init_plugin_handler(self, *args, **kwargs)
    for action in CALLER_NAMED_ACTIONS:
        self.actions[action.value] = _naming_the_caller(self, self.actions[action.value])


def _naming_the_caller(handler, forward):
    async def named(data):
        return await forward({**data, "caller_plugin_identity": _identity_of(handler)})

    return named


def _identity_of(handler) -> str:
    for plugin in handler.context.plugin_mgr.plugins:
        if plugin._runtime_plugin_handler is handler:
            return f"{plugin.manifest.metadata.author}/{plugin.manifest.metadata.name}"
    return ""


server.WebSocketServerController.__init__ = _init_on_loopback
server.process_http_request = _no_public_health
client.StdioClientController = PluginProcess
mgr.PluginManager.launch_plugin = _launch_until_it_keeps_crashing
plugin_handler.PluginConnectionHandler.__init__ = _init_naming_callers

if __name__ == "__main__":
    if closed := os.environ.pop(CLOSED_PORTS_VARIABLE, ""):
        close_ports(json.loads(closed))  # before any plugin starts: they inherit it
    main()
