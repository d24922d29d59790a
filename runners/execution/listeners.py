"""A run's event listeners: the plugins told of its message, its prompt and its replies, as
LangBot tells them (`runners.plugins.events`).

Each listening plugin is told on its own, in order, so that one that fails, times out or
cannot be reached leaves the event as it was and the next still hears it; one that calls
`prevent_postorder()` is the last. Every call is a `plugin.event` host event of the run: the
event, the plugin and its outcome (`ignored` by its listeners, `handled`, `changed` the event,
`prevented` the default, `failed` with the error). A run none of whose plugins listens asks
the runtime nothing.
"""

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing

from ledger.models import message_text
from runners.execution.run import RunState
from runners.models import RunnerDescriptor
from runners.plugins import events
from runners.protocol import MESSAGE_EVENT, runner_result
from runners.runtime.errors import RuntimeLinkError
from runners.runtime.loop_bound import Gateway

EVENT_TYPE = "plugin.event"
# What one plugin's listeners may take for one event (LangBot allows them as long as they take).
LISTENER_TIMEOUT_SECONDS = 10.0


class Listeners:
    def __init__(self, gateway: Gateway, plugins: list[str], state: RunState, context: dict):
        self.gateway = gateway
        self.plugins = plugins
        self.state = state
        self.context = context
        # The message as a listener rewrote it (`PersonNormalMessageReceived`), if one did.
        self.rewritten: str | None = None
        # Whether the run has replied (a message, heard or withheld): a `run.completed` then
        # repeats a reply, not a new one.
        self.replied = False

    @classmethod
    async def of_run(cls, gateway: Gateway, state: RunState, context: dict) -> "Listeners | None":
        """The run's listeners, those its binding names (`event_plugins`); None when no plugin
        listens to it. A command's run has none: LangBot tells listeners of commands by other
        events."""
        named = state.binding.event_plugins
        if state.descriptor.source == RunnerDescriptor.Source.COMMAND or named == []:
            return None
        plugins = await events.listening_plugins(named)
        return cls(gateway, plugins, state, context) if plugins else None

    def _timeout(self) -> float:
        if self.state.deadline is None:
            return LISTENER_TIMEOUT_SECONDS
        return max(min(LISTENER_TIMEOUT_SECONDS, self.state.deadline - time.time()), 0.1)

    async def emit(self, event_context: dict) -> dict:
        """The event context after every listening plugin saw it (up to one that stopped the
        rest, as the SDK's runtime does)."""
        name = event_context["event_name"]
        for plugin in self.plugins:
            record = {"event": name, "plugin": plugin}
            timeout = self._timeout()
            try:
                # The runtime's own timeout tells the plugin to stop; this one bounds the wait
                # for a runtime that is still starting.
                async with asyncio.timeout(timeout + 1.0):
                    answer = await self.gateway.emit_event(plugin, event_context, timeout)
            except (RuntimeLinkError, RuntimeError, TimeoutError) as exc:
                error = str(exc) or f"timed out after {timeout:.1f}s"
                self.state.host_event(EVENT_TYPE, {**record, "outcome": "failed",
                                                   "error": error})
                continue
            after = answer["event_context"]
            if events.prevented(after) and not events.prevented(event_context):
                outcome = "prevented"
            elif events.changed(event_context, after):
                outcome = "changed"
            else:
                outcome = "handled" if answer["emitted"] else "ignored"
            self.state.host_event(EVENT_TYPE, {**record, "outcome": outcome})
            event_context = after
            if events.stops_the_rest(after):
                break
        return event_context

    async def received(self) -> tuple[bool, dict | None]:
        """Before the runner, for a message: `(True, reply or None)` when a listener stopped
        it (and answered, or not), else `(False, None)`; `rewritten` is the message as a
        listener rewrote it, if one did."""
        if self.state.event.event_type != MESSAGE_EVENT:
            return False, None
        after = await self.emit(events.message_received(self.context))
        if events.prevented(after):
            return True, events.reply_message(after)
        self.rewritten = events.altered_input(after)
        return False, None

    async def around(self, payload: dict,
                     invoke: Callable[[dict], AsyncIterator[dict]]) -> AsyncIterator[dict]:
        """The runner's results (`invoke(payload)`), the listeners told of the message first
        (they may answer in the runner's place, or change what it reads) and of each reply."""
        stopped, reply = await self.received()
        if stopped:
            if reply is not None:
                yield runner_result(self.state.run_id, 1, "message.completed",
                                    {"message": reply, "file_ids": []})
            yield runner_result(self.state.run_id, 2 if reply else 1, "run.completed",
                                {"finish_reason": "stop"})
            return
        if self.rewritten is not None:
            payload = {**payload, "input": {**payload["input"], "text": self.rewritten}}
        async with aclosing(self.replies_heard(invoke(payload))) as results:
            async for result in results:
                yield result

    async def responded(self, message: dict) -> dict | None:
        """The reply as the listeners leave it: replaced, or None when withheld."""
        self.replied = True
        after = await self.emit(events.message_responded(self.context, message_text(message.get("content")), []))
        if not events.prevented(after):
            return message
        heard = events.reply_message(after)
        if heard is None:  # withheld: nor is what the runner streamed its reply
            self.state.replied = True
        return heard

    async def prompt(self, system: list[dict], history: list[dict]) -> tuple[list[dict],
                                                                              list[dict]]:
        """The built-in agent's system messages and conversation (its newest message the
        user's) as the listeners leave them: the message as one rewrote it, then
        `PromptPreProcessing`."""
        if self.rewritten is not None and history and history[-1].get("role") == "user":
            history = [*history[:-1], {**history[-1], "content": self.rewritten}]
        sent = events.prompt_preprocessing(self.context, system, history)
        after = await self.emit(sent)
        if not events.changed(sent, after):
            return system, history
        return events.prompt_messages(after)

    async def replies_heard(self, results: AsyncIterator[dict]) -> AsyncIterator[dict]:
        """The runner's results, each reply as the listeners leave it (a withheld one left
        out): a `message.completed`, or the run's end when it is the reply (its message, or
        the text the runner streamed)."""
        streamed = ""
        async with aclosing(results):
            async for result in results:
                type_ = result.get("type") if isinstance(result, dict) else None
                data = result.get("data") if isinstance(result, dict) else None
                if not isinstance(data, dict):
                    yield result
                    continue
                message = data.get("message")
                if type_ == "message.delta" and isinstance(data.get("chunk"), dict):
                    streamed += data["chunk"].get("content") or ""
                elif type_ == "message.completed" and isinstance(message, dict):
                    heard = await self.responded(message)
                    if heard is None:
                        continue
                    result = {**result, "data": {**data, "message": heard}}
                elif type_ == "run.completed" and not self.replied and (
                        isinstance(message, dict) or streamed):
                    reply = message if isinstance(message, dict) else {
                        "role": "assistant", "content": streamed}
                    heard = await self.responded(reply)
                    ended = {key: value for key, value in data.items() if key != "message"}
                    result = {**result, "data": {**ended, **({"message": heard} if heard else {})}}
                yield result
