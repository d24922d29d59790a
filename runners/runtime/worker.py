"""Reaching the runtime through the Channels layer, for deployments with several web processes.

Runtime workers (`manage.py runtime`, one or more) each own a runtime link and serve the shared
channel `langhost.runtime`, a work queue: each message is served by one live worker. Web
processes use `ChannelGateway`, a `Gateway` like `LocalGateway`. The runs themselves execute
(and keep their leases) in the web processes; a worker only streams each runner's results to
them. What the plugin asks of the host during a run is answered in the worker, whose runtime
it asked, and what that did to the run (host events, replies) travels to the run's process on
the run's own result stream (`ForwardedRunHandle`): in order with the runner's results, which
a reply or a tool call precedes. Messages:

  runner.list  {reply_channel}                          → {type: "runtime.reply", runners|error}
  run.start    {reply_channel, stream_id, runner, context, item_timeout}
               → {type: "run.accepted", worker}, then {type: "run.item", item}… (with
                 {type: "run.alive"} every liveness tick, and {type: "run.host", action, …}
                 for what the host did for the run meanwhile), then {type: "run.end"} or
                 {type: "run.error", error}
  run.cancel   {stream_id}                              to the accepting worker's own channel:
                                                          closes that run's stream (the plugin's
                                                          task is cancelled)
  runtime.status {reply_channel}                        → {type: "runtime.reply", status}
  plugin.restart {author, name}                         to every worker (a group): the runtime
                                                          relaunches the plugin, which reads its
                                                          settings again
  tool.call    {reply_channel, plugin_author, plugin_name, tool_name, parameters, timeout}
               → {type: "runtime.reply", result} or {…, error, not_found}
"""

import asyncio
import contextlib
import logging
import time
import uuid
from datetime import timedelta

from asgiref.sync import sync_to_async
from channels.consumer import AsyncConsumer
from channels.layers import DEFAULT_CHANNEL_LAYER, channel_layers
from channels.worker import Worker
from django.conf import settings
from django.utils import timezone

from runners.models import RunnerDescriptor, RuntimeWorker
from runners.observability import metrics, tracing
from runners.runtime import liveness
from runners.runtime.errors import RuntimeLinkError, ToolNotFound
from runners.runtime.host_process import host_process
from runners.runtime.loop_bound import PAGE_CALL_TIMEOUT_SECONDS

logger = logging.getLogger(__name__)

RUNTIME_CHANNEL = "langhost.runtime"
WORKERS_GROUP = "langhost.runtime-workers"
REPLY_TIMEOUT_SECONDS = 30.0
# A serving worker says it is alive every liveness tick; this many ticks of silence mean it is
# gone (killed, or cut off), and its runs fail well within their lease.
SILENT_TICKS = 3
# How long a worker's claim on a request is kept: well past any redelivery of it.
CLAIM_SECONDS = 3600


class ForwardedRunHandle:
    """The handle of a run that executes in another process, held by the runtime worker that
    streams its results: host events and replies go to that process on the run's result
    stream (see `runners.runtime.run_handle`)."""

    def __init__(self, run_id: str, reply_channel: str, channel_layer, stream: asyncio.Task):
        self.run_id = run_id
        self.query_vars: dict = {}
        self._reply_channel = reply_channel
        self._channel_layer = channel_layer
        self._stream = stream

    async def _forward(self, action: dict) -> bool:
        if self._stream.done():
            return False
        await self._channel_layer.send(self._reply_channel, {"type": "run.host", **action})
        return True

    async def record(self, type_: str, data: dict) -> bool:
        return await self._forward({"action": "record", "event_type": type_, "data": data})

    async def reply(self, message: dict) -> bool:
        return await self._forward({"action": "reply", "message": message})

    async def prompt(self, system: list[dict], history: list[dict]) -> tuple[list[dict],
                                                                              list[dict]]:
        """The built-in agent asks its own run's handle, where the run executes; a plugin
        runner's host actions never ask for a prompt: it is left as it is."""
        return system, history

    def heard_by(self, plugin: str) -> bool:
        return False  # its listeners are told where it executes

    async def run_child(self, agent_type_id: str, name: str, text: str, variables: dict,
                        extra_config: dict | None = None) -> dict:
        raise RuntimeError("a workflow's steps start where it executes, not from a runtime "
                           "worker's host actions")

    def journal_model_call(self, row: dict) -> bool:
        return False  # the run's journal is in the other process: the call writes its row

    def stop(self, status: str, reason: str) -> None:
        self._stream.cancel()

    async def written(self) -> None:
        """Written before it started: a run is kept back only where its host actions are
        answered (`Gateway.answers_host_actions_here`)."""


async def apply_host_action(run_id: str, message: dict) -> None:
    """Apply what a runtime worker forwarded (`ForwardedRunHandle`) to the run executing here."""
    handle = host_process().active_runs.get(run_id)
    if handle is None:
        return
    if message.get("action") == "reply":
        await handle.reply(message["message"])
    elif message.get("action") == "record":
        await handle.record(message["event_type"], message["data"])


class RuntimeWorkerConsumer(AsyncConsumer):
    """A runtime worker's side: serves the shared queue and the worker's own channel."""

    gateway = None  # set by `serve()` before messages arrive
    own_channel = ""  # this worker's own channel, where the cancels of its runs arrive
    streams: dict[str, asyncio.Task] = {}
    runs_served = 0

    async def dispatch(self, message):
        # Only the shared queue may deliver a message twice; a worker's own channel is its own.
        if self.scope["channel"] == RUNTIME_CHANNEL and "reply_channel" in message \
                and not await self._claim(message["reply_channel"]):
            return  # another worker took this request already
        await super().dispatch(message)

    async def _claim(self, reply_channel: str) -> bool:
        """Whether this worker is the first to take the request answered on `reply_channel`.

        channels-redis delivers a queue's message at least once, not exactly once: a worker
        that starts receiving puts back what another one took but has not finished (its
        safeguard against lost messages). A request that reaches two workers is served by
        the one that claims it first, so no runner runs twice.
        """
        connection = getattr(self.channel_layer, "connection", None)
        if connection is None:
            return True  # a layer within one process delivers each message once
        claimed = await connection(0).set(f"{self.channel_layer.prefix}:claimed:{reply_channel}",
                                          1, nx=True, ex=CLAIM_SECONDS)
        return bool(claimed)

    async def runner_list(self, message):
        try:
            stored = await self.gateway.discover()
            # Ids only: the asking process reads the descriptors from the shared database.
            reply = {"runners": [descriptor.pk for descriptor in stored]}
        except Exception as exc:
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        await self.channel_layer.send(message["reply_channel"], {"type": "runtime.reply", **reply})

    async def runtime_status(self, message):
        await self.channel_layer.send(message["reply_channel"],
                                      {"type": "runtime.reply", "status": await self.gateway.status()})

    async def plugin_restart(self, message):
        await self.gateway.restart_plugin(message["author"], message["name"])

    async def _passed_on(self, message, plugin_id: str) -> bool:
        """Whether the message went to another worker, whose runtime has the plugin."""
        if plugin_id in self.gateway.plugin_ids:
            return False
        other = await _worker_listing("plugin_ids", plugin_id, self.own_channel)
        if other is not None:
            await self.channel_layer.send(other, message)
        return other is not None

    async def _answer(self, message, asked) -> None:
        try:
            reply = {"result": await asked}
        except Exception as exc:
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        await self.channel_layer.send(message["reply_channel"], {"type": "runtime.reply", **reply})

    async def event_emit(self, message):
        if not await self._passed_on(message, message["plugin"]):
            await self._answer(message, self.gateway.emit_event(
                message["plugin"], message["event_context"], message["timeout"]))

    async def page_api(self, message):
        if not await self._passed_on(message, message["plugin"]):
            await self._answer(message, self.gateway.page_api(
                message["plugin"], message["page_id"], message["endpoint"], message["method"],
                message["body"]))

    async def engine_call(self, message):
        if not await self._passed_on(message, message["plugin"]):
            await self._answer(message, self.gateway.engine_call(
                message["plugin"], message["action"], message["data"], message["timeout"]))

    async def page_file(self, message):
        if not await self._passed_on(message, message["plugin"]):
            await self._answer(message, self.gateway.plugin_file(message["plugin"],
                                                                 message["path"]))

    async def tool_call(self, message):
        plugin_id = f"{message['plugin_author']}/{message['plugin_name']}"
        if await self._passed_on(message, plugin_id):
            return
        try:
            reply = {"result": await self.gateway.call_tool(
                message["plugin_author"], message["plugin_name"], message["tool_name"],
                message["parameters"], message["timeout"])}
        except Exception as exc:
            reply = {"error": str(exc), "not_found": isinstance(exc, ToolNotFound)}
        await self.channel_layer.send(message["reply_channel"], {"type": "runtime.reply", **reply})

    async def run_start(self, message):
        runner_id = message["runner"]["id"]
        if runner_id not in self.gateway.runner_ids:
            # Workers may load different plugins: hand the run to one whose runtime has it.
            other = await _worker_listing("runner_ids", runner_id, self.own_channel)
            if other is not None:
                await self.channel_layer.send(other, message)
                return
        await self.channel_layer.send(message["reply_channel"],
                                      {"type": "run.accepted", "worker": self.own_channel})
        type(self).runs_served += 1
        # No request cycle closes this long-lived process's connections: each run does.
        await liveness.recycle_db_connections()
        task = asyncio.ensure_future(self._stream(message))
        self.streams[message["stream_id"]] = task
        run_id = message["context"]["run_id"]
        forwarded = host_process().forwarded_runs
        forwarded[run_id] = ForwardedRunHandle(run_id, message["reply_channel"],
                                               self.channel_layer, task)

        def ended(_) -> None:
            self.streams.pop(message["stream_id"], None)
            forwarded.pop(run_id, None)

        task.add_done_callback(ended)

    async def run_cancel(self, message):
        task = self.streams.get(message["stream_id"])
        if task is not None:
            task.cancel()

    async def _stream(self, message):
        reply = message["reply_channel"]
        runner = message["runner"]
        descriptor = RunnerDescriptor(id=runner["id"], plugin_author=runner["plugin_author"],
                                      plugin_name=runner["plugin_name"],
                                      runner_name=runner["runner_name"])
        stream = self.gateway.run_runner(descriptor, message["context"], message["item_timeout"])
        alive = asyncio.ensure_future(self._say_alive(reply))
        try:
            with tracing.streamed_elsewhere(message["context"]["run_id"], runner["id"],
                                            message.get("trace")):
                async for item in stream:
                    await self.channel_layer.send(reply, {"type": "run.item", "item": item})
            await self.channel_layer.send(reply, {"type": "run.end"})
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            await self.channel_layer.send(reply, {"type": "run.error",
                                                  "error": f"{type(exc).__name__}: {exc}"})
        finally:
            alive.cancel()
            await stream.aclose()

    async def _say_alive(self, reply_channel: str) -> None:
        while True:
            await asyncio.sleep(liveness.tick_seconds())
            await self.channel_layer.send(reply_channel, {"type": "run.alive"})


async def serve(gateway, channel_layer) -> None:
    """Serve `gateway` on the shared channel and on a channel of this worker's own (which is in
    the workers' group) until cancelled."""
    own_channel = await channel_layer.new_channel()  # the default prefix: see langhost.base.health
    RuntimeWorkerConsumer.gateway, RuntimeWorkerConsumer.own_channel = gateway, own_channel
    worker = Worker(application=RuntimeWorkerConsumer.as_asgi(),
                    channels=[RUNTIME_CHANNEL, own_channel], channel_layer=channel_layer)
    membership = asyncio.ensure_future(_stay_in_workers_group(channel_layer, own_channel))
    presence = asyncio.ensure_future(_say_what_this_worker_lists(gateway, own_channel))
    try:
        await worker.arun()
    finally:
        membership.cancel()
        presence.cancel()
        with contextlib.suppress(Exception):
            await channel_layer.group_discard(WORKERS_GROUP, own_channel)
        with contextlib.suppress(Exception):
            await sync_to_async(RuntimeWorker.objects.filter(channel=own_channel).delete)()
            await gateway.withdraw()  # before the process ends: what only it had goes too


async def _stay_in_workers_group(channel_layer, own_channel: str) -> None:
    # Group membership expires (a day, in channels-redis): renewed well before.
    while True:
        await channel_layer.group_add(WORKERS_GROUP, own_channel)
        await asyncio.sleep(3600)


async def _say_what_this_worker_lists(gateway, own_channel: str) -> None:
    """Every liveness tick: this worker is alive, and its runtime lists these."""
    while True:
        try:
            await _register(own_channel, sorted(gateway.runner_ids), sorted(gateway.plugin_ids))
        except Exception:  # the next tick tries again, well within the lease
            logger.exception("recording this runtime worker failed")
        await asyncio.sleep(liveness.tick_seconds())


def _live_workers(own_channel: str):
    since = timezone.now() - timedelta(seconds=settings.LANGHOST_RUN_LEASE_SECONDS / 2)
    return RuntimeWorker.objects.filter(seen_at__gte=since).exclude(channel=own_channel)


@sync_to_async
def _register(own_channel: str, runner_ids: list[str], plugin_ids: list[str]) -> None:
    now = timezone.now()
    RuntimeWorker.objects.update_or_create(channel=own_channel, defaults={
        "runner_ids": runner_ids, "plugin_ids": plugin_ids, "seen_at": now})
    # Workers that died without a word (killed) are forgotten after a lease.
    RuntimeWorker.objects.filter(
        seen_at__lt=now - timedelta(seconds=settings.LANGHOST_RUN_LEASE_SECONDS)).delete()


async def listed_by_other_workers() -> tuple[set[str], set[str]]:
    """The runner and plugin ids the other live workers list (all live ones, before this one
    serves): what this worker's discovery must not mark unavailable."""
    return await _listed_elsewhere(RuntimeWorkerConsumer.own_channel)


@sync_to_async
def _listed_elsewhere(own_channel: str) -> tuple[set[str], set[str]]:
    runner_ids, plugin_ids = set(), set()
    for runners, plugins in _live_workers(own_channel).values_list("runner_ids", "plugin_ids"):
        runner_ids.update(runners)
        plugin_ids.update(plugins)
    return runner_ids, plugin_ids


@sync_to_async
def _worker_listing(field: str, listed_id: str, own_channel: str) -> str | None:
    """The channel of another live worker whose `field` (`runner_ids`, `plugin_ids`) lists
    `listed_id`."""
    for channel, listed in _live_workers(own_channel).values_list("channel", field):
        if listed_id in listed:
            return channel
    return None


class RuntimeUnavailable(RuntimeLinkError):
    pass


class ChannelGateway:
    """The runtime link as seen from a process that does not own it."""

    answers_host_actions_here = False  # a runtime worker answers them

    def __init__(self, channel_layer=None):
        # By default a layer instance of its own: a Redis layer receives on one event loop
        # only, and this gateway's loop is not the one the server's consumers receive on.
        self.channel_layer = channel_layer or channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)

    async def _request(self, message: dict, timeout: float = REPLY_TIMEOUT_SECONDS) -> dict:
        reply_channel = await self.channel_layer.new_channel()
        began = time.perf_counter()
        await self.channel_layer.send(RUNTIME_CHANNEL, {**message, "reply_channel": reply_channel})
        try:
            reply = await asyncio.wait_for(self.channel_layer.receive(reply_channel), timeout)
        except TimeoutError:
            raise RuntimeUnavailable(
                f"no answer on '{RUNTIME_CHANNEL}' within {timeout:.0f}s: "
                "is `manage.py runtime` running?") from None
        metrics.CHANNEL_ROUND_TRIPS.labels(message["type"]).observe(time.perf_counter() - began)
        return reply

    async def start(self) -> None:
        """Nothing to bring up: the runtime is the worker's."""

    async def stop(self) -> None:
        """Nothing to stop: the runtime is the worker's."""

    async def discover(self, timeout: float = REPLY_TIMEOUT_SECONDS) -> list[RunnerDescriptor]:
        reply = await self._request({"type": "runner.list"}, timeout)
        if "error" in reply:
            raise RuntimeUnavailable(reply["error"])
        return await _descriptors(reply["runners"])

    async def status(self) -> dict:
        return (await self._request({"type": "runtime.status"}))["status"]

    async def restart_plugin(self, author: str, name: str) -> None:
        await self.channel_layer.group_send(
            WORKERS_GROUP, {"type": "plugin.restart", "author": author, "name": name})

    async def call_tool(self, plugin_author: str, plugin_name: str, tool_name: str,
                        parameters: dict, timeout: float) -> dict:
        """Like `LocalGateway.call_tool`, through the process that owns the runtime."""
        reply = await self._request({
            "type": "tool.call", "plugin_author": plugin_author, "plugin_name": plugin_name,
            "tool_name": tool_name, "parameters": parameters, "timeout": timeout},
            timeout + REPLY_TIMEOUT_SECONDS)
        if "error" in reply:
            raise (ToolNotFound if reply.get("not_found") else RuntimeLinkError)(reply["error"])
        return reply["result"]

    async def _ask(self, message: dict, timeout: float):
        reply = await self._request(message, timeout + REPLY_TIMEOUT_SECONDS)
        if "error" in reply:
            raise RuntimeLinkError(reply["error"])
        return reply["result"]

    async def emit_event(self, plugin: str, event_context: dict, timeout: float) -> dict:
        return await self._ask({"type": "event.emit", "plugin": plugin,
                                "event_context": event_context, "timeout": timeout}, timeout)

    async def page_api(self, plugin: str, page_id: str, endpoint: str, method: str,
                       body) -> dict:
        return await self._ask({"type": "page.api", "plugin": plugin, "page_id": page_id,
                                "endpoint": endpoint, "method": method, "body": body},
                               PAGE_CALL_TIMEOUT_SECONDS)

    async def engine_call(self, plugin: str, action: str, data: dict, timeout: float) -> dict:
        return await self._ask({"type": "engine.call", "plugin": plugin, "action": action,
                                "data": data, "timeout": timeout}, timeout)

    async def plugin_file(self, plugin: str, path: str) -> tuple[bytes, str] | None:
        found = await self._ask({"type": "page.file", "plugin": plugin, "path": path},
                                PAGE_CALL_TIMEOUT_SECONDS)
        return (found[0], found[1]) if found else None

    async def execute_command(self, descriptor: RunnerDescriptor, context: dict,
                              item_timeout: float):
        """Plugin commands run where the runtime is in the serving process; through runtime
        workers the run fails saying so."""
        raise RuntimeLinkError("plugin commands do not run through runtime workers "
                               "(LANGHOST_RUNTIME_WORKER); send the message without the "
                               "command prefix, or run the runtime in the web process")
        yield  # an async generator, as the others' streams are

    async def run_runner(self, descriptor: RunnerDescriptor, context: dict, item_timeout: float):
        reply_channel = await self.channel_layer.new_channel()
        stream_id = uuid.uuid4().hex
        await self.channel_layer.send(RUNTIME_CHANNEL, {
            "type": "run.start", "reply_channel": reply_channel, "stream_id": stream_id,
            "runner": {"id": descriptor.id, "plugin_author": descriptor.plugin_author,
                       "plugin_name": descriptor.plugin_name,
                       "runner_name": descriptor.runner_name},
            "context": context, "item_timeout": item_timeout,
            "trace": tracing.carrier(context["run_id"]),
        })
        loop = asyncio.get_running_loop()
        silence_limit = SILENT_TICKS * liveness.tick_seconds()
        item_deadline = loop.time() + item_timeout
        worker = None  # the accepting worker's own channel
        finished = False
        try:
            while True:
                wait = min(silence_limit, item_deadline - loop.time())
                try:
                    message = await asyncio.wait_for(self.channel_layer.receive(reply_channel),
                                                     max(wait, 0))
                except TimeoutError:
                    if loop.time() >= item_deadline:
                        raise RuntimeUnavailable(f"no result within {item_timeout:.0f}s") from None
                    raise RuntimeUnavailable(
                        f"runtime worker {worker} went silent for {silence_limit:.0f}s"
                        if worker else f"no runtime worker took the run within "
                        f"{silence_limit:.0f}s: is `manage.py runtime` running?") from None
                if message["type"] == "run.accepted":
                    worker = message["worker"]
                elif message["type"] == "run.item":
                    item_deadline = loop.time() + item_timeout
                    yield message["item"]
                elif message["type"] == "run.host":
                    await apply_host_action(context["run_id"], message)
                elif message["type"] == "run.end":
                    finished = True
                    return
                elif message["type"] == "run.error":
                    finished = True
                    raise RuntimeUnavailable(message.get("error") or "runtime worker failed")
        finally:
            if not finished:  # the caller stopped early: cancel the plugin's task too
                # Not accepted yet: whichever worker takes the cancel knows the stream, or not.
                with contextlib.suppress(Exception):
                    await self.channel_layer.send(worker or RUNTIME_CHANNEL,
                                                  {"type": "run.cancel", "stream_id": stream_id})


@sync_to_async
def _descriptors(runner_ids: list[str]) -> list[RunnerDescriptor]:
    by_id = RunnerDescriptor.objects.in_bulk(runner_ids)
    return [by_id[runner_id] for runner_id in runner_ids if runner_id in by_id]
