"""One path for every run: event in, runner streamed, everything journaled.

`Orchestrator.run(event, binding)` is an async generator of the messages a caller delivers
(deltas, completed messages). Everything else a runner sends is recorded in the ledger and
published to the Channels group `run.<run_id>` for live viewers.
"""

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from contextlib import aclosing

import pydantic
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from langbot_plugin.api.entities.builtin.runner import result as sdk_result

from ledger import wire
from ledger.models import TERMINAL_STATUSES, EventSource, RunStatus
from ledger.selectors import runs as readers
from ledger.services import leases
from ledger.services import runs as ledger
from runners.agent import reply_files
from runners.execution import (
    attachments,
    context,
    deltas,
    interactions,
    journal,
    sequences,
    steering,
)
from runners.execution.children import Children
from runners.execution.guardrails import Guardrails
from runners.execution.journal import Journal
from runners.execution.listeners import Listeners
from runners.execution.results import IDLE, Results, Stop, next_result
from runners.execution.run import TOOL_CALL_TYPES, LocalRunHandle, RunMessage, RunState
from runners.grants.knowledge import knowledge_grants
from runners.grants.llm import model_grants
from runners.grants.skills import skill_grants
from runners.grants.tools import tool_grants
from runners.models import RunnerDescriptor
from runners.observability import logs, metrics, tracing
from runners.plugins import registry
from runners.protocol import (
    INTERRUPT,
    REJECT,
    STEER,
    AgentBinding,
    AgentEventEnvelope,
    ConversationBusy,
    RunRefused,
    new_run_id,
)
from runners.runtime.host_process import host_process
from runners.runtime.link import RuntimeLinkError
from runners.runtime.loop_bound import Gateway

logger = logging.getLogger(__name__)

PAYLOAD_MODELS: dict[str, type[pydantic.BaseModel]] = {
    "message.delta": sdk_result.MessageDeltaPayload,
    "message.completed": sdk_result.MessageCompletedPayload,
    "tool.call.started": sdk_result.ToolCallStartedPayload,
    "tool.call.completed": sdk_result.ToolCallCompletedPayload,
    "state.updated": sdk_result.StateUpdatedPayload,
    "action.requested": sdk_result.ActionRequestedPayload,
    "run.completed": sdk_result.RunCompletedPayload,
    "run.failed": sdk_result.RunFailedPayload,
    "processor.log": sdk_result.ProcessorLogPayload,
}
# What the caller sees of a run: what it says, and the tools it says it calls (the host's
# own records of the calls it made for the runner stay in the run's events: an SDK runner
# reports each call itself too).
DELIVERED_TYPES = {"message.delta", "message.completed", *TOOL_CALL_TYPES}
STREAMED_TYPES = {"message.delta"}
NO_DEADLINE_ITEM_TIMEOUT = 300.0
# How long a message its caller sees once committed waits for the results right behind it.
REPLY_PATIENCE = 0.002


# How often a queued run looks whether its turn came: soon, then less often.
TURN_POLL_SECONDS = 0.05
TURN_POLL_MAX_SECONDS = 0.5


def _turn(multitask: str | None) -> str | None:
    """The ledger's part of a strategy: refuse, or queue behind the active run."""
    if multitask is None:
        return None
    return ledger.REJECT if multitask == REJECT else ledger.ENQUEUE


class ProtocolError(Exception):
    """The runner broke the result protocol; the run fails with this reason."""


def _first_token(state: RunState) -> None:
    if state.first_token_after is None:
        state.first_token_after = time.monotonic() - state.began
        metrics.TIME_TO_FIRST_TOKEN.labels(state.descriptor.id).observe(state.first_token_after)


class Orchestrator:
    """Runs agents. `gateway` reaches plugin runners (the runtime link, wherever it lives)."""

    def __init__(self, gateway: Gateway):
        self.gateway = gateway
        self.channel_layer = get_channel_layer()
        # The outcome of each run this orchestrator ended, as the ledger recorded it.
        self.outcomes: dict[str, dict] = {}

    # --- public API ------------------------------------------------------------------------

    async def run(self, event: AgentEventEnvelope, binding: AgentBinding, *,
                  run_id: str | None = None, agent_name: str = "",
                  wait_durable: bool = True, multitask: str | None = None,
                  queued: bool = False, announced: bool = False) -> AsyncIterator[RunMessage]:
        """Messages once committed; without `wait_durable` (a caller showing nothing before the
        end) as they come, the run still ending once all is committed.

        `multitask` is what a message does when its conversation has an active run (see
        `MULTITASK_STRATEGIES`); without one it steers a run that takes it, or runs beside.
        `queued`: the run's row waits in its conversation already (adopted from a process
        that went away).

        Unless the caller `announced` the run id before the run starts, the run's row may be
        written with its first results (see `_may_defer_start`).

        What is logged meanwhile carries the run's ids (`runners.observability.logs`); with
        tracing on, the run is a span (`runners.observability.tracing`).
        """
        run_id = run_id or new_run_id()
        logging_as = logs.enter_run(run_id, event.conversation_id, agent_name or binding.runner_id)
        traced = tracing.run_started(run_id, binding.runner_id, agent_name or binding.runner_id,
                                     event.conversation_id)
        try:
            async with aclosing(self._run(event, binding, run_id, agent_name, wait_durable,
                                          multitask, queued, announced)) as messages:
                async for message in messages:
                    yield message
        finally:
            tracing.run_ended(traced, self.outcomes.get(run_id))
            logs.leave_run(logging_as)

    async def _run(self, event: AgentEventEnvelope, binding: AgentBinding, run_id: str,
                   agent_name: str, wait_durable: bool, multitask: str | None, queued: bool,
                   announced: bool) -> AsyncIterator[RunMessage]:
        descriptor = await self._descriptor(binding.runner_id)
        process = host_process()
        claimed_by = (await steering.try_steer(event, binding, descriptor)
                      if multitask in (None, STEER) and not queued else None)
        if claimed_by:
            # The message joined an active run: no run of its own, the caller learns which.
            yield RunMessage(claimed_by, 0, "steering.queued",
                             {"claimed_run_id": claimed_by, "event_id": event.event_id})
            return
        apis = context.available_apis(event, binding, descriptor)
        models = await model_grants(binding, descriptor)
        skills = await skill_grants(binding)
        tools = await tool_grants(binding, descriptor, f"{event.project_id}:{event.conversation_id}"
                                  if apis["box"] else None, skills)
        knowledge = await knowledge_grants(binding, descriptor, event.project_id)
        scopes = context.state_context(event, binding, descriptor.id)
        timeout = binding.timeout_seconds
        deadline = time.time() + timeout if timeout else None
        try:
            started = None if queued else await journal.start_run(
                run_id, event, binding, descriptor, apis, scopes, deadline, agent_name,
                process.owner_id, models, tools, knowledge, skills, turn=_turn(multitask),
                defer=self._may_defer_start(event, descriptor, multitask, announced))
        except ledger.DuplicateEvent as duplicate:
            async for message in self._replay(duplicate.run_id):
                yield message
            return
        except ledger.ConversationBusy as busy:
            raise ConversationBusy(busy.run_id) from None
        if started is not None and started.queued and multitask == INTERRUPT:
            # Queued first (a replayed message interrupts nothing), then the runs before it
            # are cancelled.
            for active in await ledger.active_runs(event.conversation_id):
                if active != run_id:
                    await self.cancel(active, "interrupted: a new message arrived")
        if started is None or started.queued:
            started = await self._wait_turn(run_id, event, apis, scopes, timeout)
            if started is None:
                return
            deadline = time.time() + timeout if timeout else None
        state = RunState(run_id=run_id, event=event, binding=binding, descriptor=descriptor,
                         scopes=scopes, deadline=deadline, agent_name=agent_name,
                         calls_models=bool(models.models),
                         journal=Journal(run_id, lambda frames: self._publish(run_id, frames),
                                         wait_durable, started.start))
        handle = LocalRunHandle(state)
        process.run_started(handle)
        try:
            runner_input = await attachments.for_runner(event, run_id, apis["box"])
            payload = context.build_context(run_id=run_id, event=event, binding=binding,
                                            apis=apis, state=started.state, deadline_at=deadline,
                                            latest_cursor=started.latest_cursor,
                                            grants=models, tools=tools, knowledge=knowledge,
                                            skills=skills,
                                            runner_input=runner_input)
            handle.listeners = await Listeners.of_run(self.gateway, state, payload)
            handle.children = Children(self.run_to_end, state)
            async for message in self._stream(state, payload, handle):
                yield message
        except (GeneratorExit, asyncio.CancelledError):
            await self._finish(state, RunStatus.CANCELLED, "consumer_cancelled")
            raise
        except Exception as exc:  # the runner, the runtime or the host broke: record why
            logger.exception("run %s failed", run_id)
            await self._finish(state, self._failure_status(state), f"{type(exc).__name__}: {exc}")
        finally:
            process.run_ended(run_id)

    async def run_to_end(self, event: AgentEventEnvelope, binding: AgentBinding, **kwargs) -> dict:
        """Run and collect: `{run_id, status, status_reason, messages, usage}`."""
        run_id = kwargs.pop("run_id", None) or new_run_id()
        messages = [m.as_dict() async for m in self.run(event, binding, run_id=run_id, **kwargs)]
        if messages and messages[0]["type"] == "steering.queued":
            return {**wire.steered_outcome(claimed_run_id=messages[0]["run_id"],
                                           event_id=event.event_id,
                                           conversation_id=event.conversation_id),
                    "messages": messages}
        # The event id finds the run even when it was replayed from an earlier submission.
        run = (self.outcomes.pop(run_id, None)
               or await readers.run_outcome_for_event(event.ledger_key))
        return {**run, "messages": messages}

    async def _wait_turn(self, run_id: str, event: AgentEventEnvelope, apis, scopes: dict,
                         timeout: float | None) -> ledger.StartedRun | None:
        """Wait until the queued run's turn in its conversation came; None when it ended
        meanwhile (cancelled: its outcome is recorded). A caller that goes away cancels it."""
        process = host_process()
        process.run_waiting(run_id)
        pause = TURN_POLL_SECONDS
        try:
            while True:
                if process.stopping:  # the row stays queued: another process adopts it
                    await asyncio.sleep(TURN_POLL_MAX_SECONDS)
                    continue
                started = await journal.promote_queued(
                    run_id, event, apis, scopes, process.owner_id,
                    time.time() + timeout if timeout else None)
                if isinstance(started, ledger.StartedRun):
                    return started
                if started is not None:  # cancelled meanwhile, or adopted by another process
                    ended = await sync_to_async(readers.run_outcome_sync)(run_id)
                    self.outcomes[run_id] = ended
                    if started in TERMINAL_STATUSES:
                        await self._publish(run_id, [wire.run_status(
                            run_id=run_id, status=ended["status"],
                            status_reason=ended["status_reason"], sequence=0)])
                    return None
                await asyncio.sleep(pause)
                pause = min(pause * 1.5, TURN_POLL_MAX_SECONDS)
        except (GeneratorExit, asyncio.CancelledError):
            await leases.request_cancel(run_id, "consumer_cancelled")
            raise
        finally:
            process.run_ended(run_id)

    @staticmethod
    async def cancel(run_id: str, reason: str = "cancelled by request"):
        """Flag the run and, when it runs in this process, stop it now."""
        return await host_process().cancel(run_id, reason)

    # --- steps -----------------------------------------------------------------------------

    def _may_defer_start(self, event: AgentEventEnvelope, descriptor: RunnerDescriptor,
                         multitask: str | None, announced: bool) -> bool:
        """Whether the run's row may wait for its first results (`Journal`): when nobody can
        ask for the run before then. Its caller learns its id from its first message, which
        comes once committed; its host actions are answered here, where its handle writes the
        row first (`RunHandle.written`). A run that takes a turn, whose event may be replayed
        (an idempotency key), or whose runner may fetch the message's files over HTTP (their
        links check the run's row), is written at once."""
        return (not announced and multitask is None and event.idempotency_key is None
                and not event.input.attachments
                and (descriptor.source == RunnerDescriptor.Source.BUILTIN
                     or self.gateway.answers_host_actions_here))

    async def _descriptor(self, runner_id: str) -> RunnerDescriptor:
        try:
            return await registry.get_descriptor(runner_id, self.gateway.discover)
        except registry.RunnerNotFound as exc:
            raise RunRefused(str(exc)) from exc
        except (RuntimeLinkError, RuntimeError, TimeoutError) as exc:  # rediscovery failed
            raise RunRefused(f"Runner '{runner_id}' cannot be looked up now: {exc}") from exc

    def _invoke(self, state: RunState, payload: dict,
                handle: LocalRunHandle) -> AsyncIterator[dict]:
        descriptor = state.descriptor
        if descriptor.source == RunnerDescriptor.Source.BUILTIN:
            return registry.BUILTINS[descriptor.id]["run"](payload, handle)
        item_timeout = (state.deadline - time.time() + 1.0) if state.deadline else NO_DEADLINE_ITEM_TIMEOUT
        if descriptor.source == RunnerDescriptor.Source.COMMAND:
            return self.gateway.execute_command(descriptor, payload, max(item_timeout, 1.0))
        return self.gateway.run_runner(descriptor, payload, max(item_timeout, 1.0))

    async def _stream(self, state: RunState, payload: dict,
                      handle: LocalRunHandle) -> AsyncIterator[RunMessage]:
        """The run's messages for its caller, each once the ledger has committed it.

        A caller that waits for commits gets a whole message up to REPLY_PATIENCE later when
        more results follow it at once (a short run's state and end): they are committed with
        it, one transaction instead of one each. Streamed text (deltas) never waits: its time
        to first token is the runner's. What the runner said before it failed still reaches
        the caller."""
        source = (self._invoke(state, payload, handle) if handle.listeners is None
                  else handle.listeners.around(
                      payload, lambda told: self._invoke(state, told, handle)))
        if guardrails := Guardrails.of_run(state, handle):
            source = guardrails.guarded(state.event.input.text or "", source)
        results = Results(deltas.coalesced(source))
        held: list[RunMessage] = []
        due = 0.0  # when the first held message must reach the caller
        over, stop, failure = False, None, None
        try:
            while not over:
                raw, message = IDLE, None
                try:
                    raw = await next_result(
                        state, results, max(due - state.loop.time(), 0.0) if held else None)
                    if raw is not IDLE:
                        message = await self._handle(state, raw)
                        if message is not None and message.type in STREAMED_TYPES:
                            _first_token(state)
                except StopAsyncIteration:
                    over = True
                except Stop as stopped:
                    over, stop = True, (stopped.status, stopped.reason)
                except Exception as exc:  # the run fails once its messages are out
                    over, failure = True, exc
                if not held:
                    due = state.loop.time() + REPLY_PATIENCE
                held += self._host_replies(state) + ([message] if message else [])
                if held and (over or raw is IDLE or not state.journal.wait_durable
                             or (message is not None and message.type in STREAMED_TYPES)):
                    await state.journal.durable(held[-1].sequence)
                    for ready in held:
                        yield ready
                    held = []
            if failure is not None:
                raise failure
            await self._finish(state, *(stop or self._ending(state)))
        finally:
            # Closing the stream cancels the runner on the runtime's side.
            await results.aclose()

    @staticmethod
    def _host_replies(state: RunState) -> list[RunMessage]:
        replies, state.host_replies = state.host_replies, []
        return replies

    def _ending(self, state: RunState) -> tuple[str, str]:
        if state.status:
            return state.status, state.reason
        return RunStatus.FAILED, "runner.protocol: the stream ended without run.completed or run.failed"

    def _failure_status(self, state: RunState) -> str:
        if state.deadline is not None and time.time() >= state.deadline:
            return RunStatus.TIMEOUT
        return RunStatus.FAILED

    # --- one result ------------------------------------------------------------------------

    async def _handle(self, state: RunState, raw) -> RunMessage | None:
        if not isinstance(raw, dict):
            state.host_event("result.dropped", {"reason": "result is not an object"})
            return None
        sequence = sequences.runner_sequence(state, raw.get("sequence"),
                                            raw.get(deltas.MERGED_FROM))
        if sequence is None:
            return None
        type_ = raw.get("type")
        data = raw.get("data") if isinstance(raw.get("data"), dict) else {}
        usage = raw.get("usage") if isinstance(raw.get("usage"), dict) else None
        if not isinstance(type_, str) or not type_:
            state.append("unknown", data, usage, sequence)
            raise ProtocolError("runner.protocol: a result arrived without a type")
        model = PAYLOAD_MODELS.get(type_)
        if model is None:
            logger.warning("run %s: unknown result type %r stored and ignored", state.run_id, type_)
            state.append(type_, data, usage, sequence)
            return None
        try:
            data = model.model_validate(data).model_dump(
                mode="json", exclude_none=type_ in ("run.completed", "message.completed"),
                exclude_defaults=type_ == "message.delta")
        except pydantic.ValidationError as exc:
            state.host_event("result.dropped", {
                "reason": f"invalid {type_} payload", "runner_sequence": sequence,
                "errors": json.loads(exc.json(include_url=False, include_input=False)),
            })
            return None
        if raw.get("run_id") not in (None, state.run_id):
            raise ProtocolError(f"runner.protocol: a result names run {raw.get('run_id')!r}")
        if usage is not None:
            state.usage = usage
        state_write = None
        if type_ in ("message.completed", "run.completed") and isinstance(data.get("message"),
                                                                           dict):
            data["message"] = await reply_files.saved(data["message"],
                                                      state.event.conversation_id, state.run_id,
                                                      data.get("file_ids") or [])
        reply = data.get("message") if type_ == "message.completed" else None
        if type_ == "state.updated":
            state_write = state.state_write(data)
        elif type_ == "message.delta":
            if isinstance(data["chunk"].get("content"), str):
                state.delta_text += data["chunk"]["content"]
        elif type_ == "tool.call.completed":
            state.follow_transfer(data)
        if type_ == "run.completed" and not state.replied:
            # The run's end may carry its reply; a runner that only streams deltas (LangBot's
            # Dify and n8n runners) still answers: the assembled text is its reply.
            reply = data.get("message") or (
                {"role": "assistant", "content": state.delta_text} if state.delta_text else None)
        state.replied = state.replied or bool(reply)
        transcript = state.assistant_transcript(reply)
        if type_ == "run.completed":
            state.status, state.reason = RunStatus.COMPLETED, data.get("finish_reason", "stop")
        elif type_ == "run.failed":
            code = data.get("code") or "runner.error"
            state.status = RunStatus.TIMEOUT if code == "runner.timeout" else RunStatus.FAILED
            state.reason = f"{code}: {data.get('error')}"
        completed = None
        if type_ == "run.completed" and reply:
            # The reply that came with the run's end is a message of its own: its own sequence
            # in the ledger, before the end.
            completed = state.append("message.completed", {"message": reply, "file_ids": []},
                                     None, None, source=EventSource.HOST, transcript=transcript)
            transcript = None
        terminal = type_ in ("run.completed", "run.failed") and not state.terminal_written
        state.terminal_written = state.terminal_written or terminal
        message = state.append(type_, data, usage, sequence, state_write=state_write,
                               transcript=transcript, finish=terminal)
        if completed is not None:
            return completed
        if type_ == "action.requested" and interactions.is_interaction(data):
            frame = await interactions.requested(state, data.get("payload") or {})
            return RunMessage(state.run_id, message.sequence, interactions.FRAME_TYPE,
                              frame) if frame else None
        return message if type_ in DELIVERED_TYPES else None

    async def _publish(self, run_id: str, events: list[dict]) -> None:
        await self.channel_layer.group_send(f"run.{run_id}", {"type": "run.events",
                                                              "events": events})

    async def _finish(self, state: RunState, status: str, reason: str) -> None:
        """Wait for the journal, then end the run (unless its terminal result already did)."""
        if state.finished:
            return
        try:
            ended = await state.journal.drain()
        except Exception as exc:
            logger.exception("run %s: writing its results failed", state.run_id)
            ended, status, reason = None, RunStatus.FAILED, f"ledger write failed: {exc}"
        if ended is None:
            ended = await ledger.finish_run(state.run_id, status, reason, state.usage,
                                            state.steers, state.calls_models)
        self.outcomes[state.run_id] = ended
        await self._published_end(state, ended["status"], ended["status_reason"])

    async def _published_end(self, state: RunState, status: str, reason: str) -> None:
        state.finished = True
        await self._publish(state.run_id, [wire.run_status(
            run_id=state.run_id, status=status, status_reason=reason,
            sequence=state.ledger_sequence)])

    async def _replay(self, run_id: str | None) -> AsyncIterator[RunMessage]:
        """The outcome of a run already started for this event: its delivered messages."""
        if run_id is None:
            return
        for event in await readers.run_events(run_id, wait_terminal=True):
            if event["type"] in DELIVERED_TYPES:
                yield RunMessage(run_id, event["sequence"], event["type"], event["data"],
                                 event["usage"])
