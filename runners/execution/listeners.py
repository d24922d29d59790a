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
from collections.abc import AsyncIterator
from contextlib import aclosing

from runners.execution.run import RunState
from runners.models import RunnerDescriptor
from runners.plugins import events
from runners.runtime.errors import RuntimeLinkError
from runners.runtime.loop_bound import Gateway

EVENT_TYPE = "plugin.event"
# What one plugin's listeners may take for one event (LangBot allows them as long as they take).
LISTENER_TIMEOUT_SECONDS = 10.0
EVENT_PLUGINS_KEY = "event_plugins"


class Listeners:
    def __init__(self, gateway: Gateway, plugins: list[str], state: RunState, context: dict):
        self.gateway = gateway
        self.plugins = plugins
        self.state = state
        self.context = context

    @classmethod
    async def of_run(cls, gateway: Gateway, state: RunState, context: dict) -> "Listeners | None":
        """The run's listeners; None when no plugin listens to it. A command's run has none:
        LangBot tells listeners of commands by other events."""
        if state.descriptor.source == RunnerDescriptor.Source.COMMAND:
            return None
        named = state.binding.runner_config.get(EVENT_PLUGINS_KEY)
        plugins = await events.listening_plugins(named if isinstance(named, list) else None)
        return cls(gateway, plugins, state, context) if plugins else None

    def _timeout(self) -> float:
        if self.state.deadline is None:
            return LISTENER_TIMEOUT_SECONDS
        return max(min(LISTENER_TIMEOUT_SECONDS, self.state.deadline - time.time()), 0.1)

    async def emit(self, event_context: dict) -> dict:
        """The event context after every listening plugin saw it."""
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
            if events.prevented(after):
                outcome = "prevented"
            elif events.changed(event_context, after):
                outcome = "changed"
            else:
                outcome = "handled" if answer["emitted"] else "ignored"
            self.state.host_event(EVENT_TYPE, {**record, "outcome": outcome})
            event_context = after
            if events.stops_the_rest(after) or events.prevented(after):
                break
        return event_context

    async def received(self) -> tuple[bool, dict | None, str | None]:
        """Before the runner: `(True, reply or None, None)` when a listener stopped it (and
        answered, or not), else `(False, None, text)` with the message as a listener rewrote
        it, if one did."""
        after = await self.emit(events.message_received(self.context))
        if events.prevented(after):
            return True, events.reply_message(after), None
        return False, None, events.altered_input(after)

    async def responded(self, message: dict) -> dict | None:
        """The reply as the listeners leave it: replaced, or None when withheld."""
        content = message.get("content")
        text = content if isinstance(content, str) else "".join(
            part.get("text") or "" for part in content or [] if isinstance(part, dict))
        after = await self.emit(events.message_responded(self.context, text, []))
        if not events.prevented(after):
            return message
        return events.reply_message(after)

    async def prompt(self, system: list[dict], history: list[dict]) -> tuple[list[dict],
                                                                              list[dict]]:
        """The built-in agent's system messages and conversation as the listeners leave them
        (as they were, unless one changed them)."""
        sent = events.prompt_preprocessing(self.context, system, history)
        after = await self.emit(sent)
        if not events.changed(sent, after):
            return system, history
        return events.prompt_messages(after)

    async def replies_heard(self, results: AsyncIterator[dict]) -> AsyncIterator[dict]:
        """The runner's results, each reply (a `message.completed`, or the message a
        `run.completed` carries) as the listeners leave it: a withheld one is left out."""
        async with aclosing(results):
            async for result in results:
                data = result.get("data") if isinstance(result, dict) else None
                message = data.get("message") if isinstance(data, dict) else None
                if result.get("type") in ("message.completed", "run.completed") and isinstance(
                        message, dict) and message.get("role", "assistant") == "assistant":
                    heard = await self.responded(message)
                    if heard is None and result["type"] == "message.completed":
                        continue
                    data = {key: value for key, value in data.items() if key != "message"}
                    result = {**result, "data": {**data, **({"message": heard} if heard else {})}}
                yield result
