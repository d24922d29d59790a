"""One path for every run: event in, runner streamed, everything journaled.

`Orchestrator.run(event, binding)` is an async generator of the messages a caller delivers
(deltas, completed messages). Everything else a runner sends is recorded in the ledger and
published to the Channels group `run.<run_id>` for live viewers.
"""

import asyncio
import json
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pydantic
from channels.layers import get_channel_layer
from langbot_plugin.api.entities.builtin.runner import result as sdk_result

from ledger.models import EventSource, RunStatus
from ledger.selectors import runs as readers
from ledger.services import runs as ledger
from runners.execution import builtins, context, registry
from runners.execution.protocol import AgentBinding, AgentEventEnvelope
from runners.models import RunnerDescriptor
from runners.plugins.runtime.link import RuntimeLinkError

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
DELIVERED_TYPES = {"message.delta", "message.completed"}
NO_DEADLINE_ITEM_TIMEOUT = 300.0
CANCEL_POLL_SECONDS = 1.0
# How long a result may wait to share its ledger write with the ones after it; the run's end
# is written at once.
JOURNAL_LINGER_SECONDS = 0.05
STEERING_EVENT_TYPE = "message.received"

# A process-wide owner id: the lease on every run this process executes carries it.
OWNER_ID = f"{os.uname().nodename}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class RunRefused(Exception):
    """The run could not start (unknown runner, bad binding); nothing was recorded."""


class ProtocolError(Exception):
    """The runner broke the result protocol; the run fails with this reason."""


class _Stop(Exception):
    """The run must stop before the runner's next result (cancelled, deadline passed)."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass
class RunMessage:
    """One message delivered to the caller, with its ledger sequence."""

    run_id: str
    sequence: int
    type: str
    data: dict
    usage: dict | None = None

    def as_dict(self) -> dict:
        return {"run_id": self.run_id, "sequence": self.sequence, "type": self.type,
                "data": self.data, "usage": self.usage}


class _Journal:
    """Writes one run's results to the ledger, in order, off the run loop's critical path.

    Results go out in batches, one transaction each: a batch is written once its first result
    has waited JOURNAL_LINGER_SECONDS, or at once when the run drains (its stream ended or it
    stopped). A burst of results costs one round trip instead of one each, and the loop keeps
    reading results while the database works. Each event is published to live viewers once it
    is persisted; `drain()` waits for all of it.
    """

    def __init__(self, run_id: str, publish):
        self.run_id = run_id
        self.publish = publish
        self.pending: list[tuple[ledger.ResultWrite, dict]] = []
        self.writer: asyncio.Task | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.draining = False
        self.error: Exception | None = None
        self.ended: tuple[str, str] | None = None

    def add(self, write: ledger.ResultWrite, frame: dict) -> None:
        if self.error is not None:
            raise self.error
        self.pending.append((write, frame))
        if not self._writing():
            self._arm()

    async def drain(self) -> tuple[str, str] | None:
        """Wait until everything is written; the run's (status, reason) if a result ended it."""
        self.draining = True
        self._start()
        if self.writer is not None:
            await asyncio.shield(self.writer)
        if self.error is not None:
            raise self.error
        return self.ended

    def _writing(self) -> bool:
        return self.writer is not None and not self.writer.done()

    def _arm(self) -> None:
        if self.timer is None:
            self.timer = asyncio.get_running_loop().call_later(JOURNAL_LINGER_SECONDS,
                                                               self._start)

    def _start(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.pending and self.error is None and not self._writing():
            self.writer = asyncio.ensure_future(self._write())

    async def _write(self) -> None:
        try:
            while self.pending:
                batch, self.pending = self.pending, []
                ended = await ledger.record_results(self.run_id, [write for write, _ in batch])
                for _, frame in batch:
                    await self.publish(frame)
                self.ended = ended or self.ended
                if self.pending and not self.draining:
                    self._arm()  # what arrived meanwhile lingers like any new batch
                    return
        except Exception as exc:  # surfaced by the next add() or by drain()
            self.error = exc


@dataclass
class _RunState:
    """What the loop tracks for one run while it streams."""

    run_id: str
    event: AgentEventEnvelope
    binding: AgentBinding
    descriptor: RunnerDescriptor
    scopes: dict
    deadline: float | None
    agent_name: str
    seen_runner_sequences: set = field(default_factory=set)
    last_runner_sequence: int = 0
    ledger_sequence: int = 0
    status: str | None = None
    reason: str = ""
    usage: dict | None = None
    terminal_written: bool = False
    finished: bool = False
    transcript_written: bool = False
    journal: _Journal | None = None
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.get_running_loop)
    # (status, reason) once the run must stop (cancelled, deadline); the wait for the runner's
    # next result, while one is under way, is cut short through `waiting`.
    stop: tuple[str, str] | None = None
    waiting: asyncio.Timeout | None = None

    @property
    def steers(self) -> bool:
        return bool((self.descriptor.capabilities or {}).get("steering"))


_active_runs: dict[str, _RunState] = {}


def _request_stop(state: _RunState, status: str, reason: str) -> None:
    """Stop the run (the first reason wins), cutting short its wait for the next result."""
    if state.stop is None:
        state.stop = (status, reason)
    if state.waiting is not None and not state.waiting.expired():
        state.waiting.reschedule(state.loop.time())


def new_run_id() -> str:
    return str(uuid.uuid4())


class Orchestrator:
    """Runs agents. `gateway` reaches plugin runners (the runtime link, wherever it lives)."""

    def __init__(self, gateway):
        self.gateway = gateway
        self.channel_layer = get_channel_layer()

    # --- public API ------------------------------------------------------------------------

    async def run(self, event: AgentEventEnvelope, binding: AgentBinding, *,
                  run_id: str | None = None, agent_name: str = "") -> AsyncIterator[RunMessage]:
        run_id = run_id or new_run_id()
        descriptor = await self._descriptor(binding.runner_id)
        claimed_by = await self._try_steer(event, descriptor)
        if claimed_by:
            # The message joined an active run: no run of its own, the caller learns which.
            yield RunMessage(claimed_by, 0, "steering.queued",
                             {"claimed_run_id": claimed_by, "event_id": event.event_id})
            return
        apis = context.available_apis(event, binding, descriptor)
        scopes = context.state_context(event, binding, descriptor.id)
        timeout = binding.timeout_seconds
        deadline = time.time() + timeout if timeout else None
        try:
            snapshot = await self._journal_start(run_id, event, binding, descriptor, apis, scopes,
                                                 deadline, agent_name)
        except ledger.DuplicateEvent as duplicate:
            async for message in self._replay(duplicate.run_id):
                yield message
            return
        state = _RunState(run_id=run_id, event=event, binding=binding, descriptor=descriptor,
                          scopes=scopes, deadline=deadline, agent_name=agent_name,
                          journal=_Journal(run_id, lambda frame: self._publish(run_id, frame)))
        _active_runs[run_id] = state
        try:
            payload = context.build_context(run_id=run_id, event=event, binding=binding,
                                            apis=apis, state=snapshot, deadline_at=deadline)
            async for message in self._stream(state, payload):
                yield message
        except (GeneratorExit, asyncio.CancelledError):
            await self._finish(state, RunStatus.CANCELLED, "consumer_cancelled")
            raise
        except Exception as exc:  # the runner, the runtime or the host broke: record why
            logger.exception("run %s failed", run_id)
            await self._finish(state, self._failure_status(state), f"{type(exc).__name__}: {exc}")
        finally:
            _active_runs.pop(run_id, None)

    async def run_to_end(self, event: AgentEventEnvelope, binding: AgentBinding, **kwargs) -> dict:
        """Run and collect: `{run_id, status, status_reason, messages, usage}`."""
        run_id = kwargs.pop("run_id", None) or new_run_id()
        messages = [m.as_dict() async for m in self.run(event, binding, run_id=run_id, **kwargs)]
        if messages and messages[0]["type"] == "steering.queued":
            claimed = messages[0]["run_id"]
            return {"run_id": claimed, "event_id": event.event_id, "status": "steered",
                    "status_reason": f"absorbed into active run {claimed}", "usage": None,
                    "messages": messages}
        # The event id finds the run even when it was replayed from an earlier submission.
        run = await readers.run_outcome_for_event(event.event_id)
        return {**run, "messages": messages}

    @staticmethod
    async def cancel(run_id: str, reason: str = "cancelled by request"):
        """Flag the run and, when it runs in this process, stop it now."""
        run = await ledger.request_cancel(run_id, reason)
        state = _active_runs.get(run_id)
        if state is not None and run is not None:
            # The run may stream on another thread's loop; its loop stops it.
            state.loop.call_soon_threadsafe(_request_stop, state, RunStatus.CANCELLED,
                                            run.status_reason or "cancel_requested")
        return run

    # --- steps -----------------------------------------------------------------------------

    async def _descriptor(self, runner_id: str) -> RunnerDescriptor:
        try:
            return await registry.get_descriptor(runner_id, self.gateway.discover)
        except registry.RunnerNotFound as exc:
            raise RunRefused(str(exc)) from exc
        except (RuntimeLinkError, RuntimeError, TimeoutError) as exc:  # rediscovery failed
            raise RunRefused(f"Runner '{runner_id}' cannot be looked up now: {exc}") from exc

    async def _try_steer(self, event, descriptor) -> str | None:
        """A message for a conversation whose active run steers joins the oldest such run.

        Returns the id of the run that took it, or None when a run of its own should start.
        """
        if not (event.event_type == STEERING_EVENT_TYPE and event.conversation_id
                and (descriptor.capabilities or {}).get("steering")):
            return None
        for active in list(_active_runs.values()):
            if (active.descriptor.id == descriptor.id
                    and active.event.conversation_id == event.conversation_id
                    and active.event.thread_id == event.thread_id):
                item = {
                    "claimed_run_id": active.run_id, "runner_id": descriptor.id,
                    "claimed_at": int(time.time()),
                    "event": {"event_id": event.event_id, "event_type": event.event_type,
                              "event_time": event.event_time, "source": event.source},
                    "conversation": {"conversation_id": event.conversation_id,
                                     "thread_id": event.thread_id},
                    "actor": event.actor.model_dump(),
                    "input": event.input.model_dump(exclude_none=True),
                }
                queued = await ledger.enqueue_steering(
                    active.run_id, event.event_id, item,
                    event_log=self._event_log(event, active.run_id, descriptor.id,
                                              steering={"status": "queued",
                                                        "claimed_by_run_id": active.run_id}),
                    user_transcript=self._user_transcript(event),
                )
                if queued:
                    return active.run_id
        return None

    async def _journal_start(self, run_id, event, binding, descriptor, apis, scopes, deadline,
                             agent_name):
        deadline_at = datetime.fromtimestamp(deadline, UTC) if deadline else None
        return await ledger.start_run(
            run={
                "run_id": run_id, "event_id": event.event_id, "agent_id": event.agent_id or "",
                "actor_type": event.actor.actor_type, "actor_id": event.actor.actor_id or "",
                "binding_id": binding.binding_id, "runner_id": descriptor.id,
                "conversation_id": event.conversation_id or "",
                "thread_id": event.thread_id or "", "project_id": event.project_id or "",
                "deadline_at": deadline_at,
                "authorization_json": context.authorization_snapshot(event, binding, descriptor,
                                                                     apis, scopes),
                "metadata_json": {"event_type": event.event_type, "source": event.source,
                                  "agent_name": agent_name,
                                  "input": event.input.model_dump(exclude_none=True)},
            },
            event_log=self._event_log(event, None, descriptor.id),
            user_transcript=self._user_transcript(event),
            owner_id=OWNER_ID,
            scope_keys={scope: info["scope_key"] for scope, info in scopes.items()},
        )

    @staticmethod
    def _event_log(event: AgentEventEnvelope, run_id, runner_id, **metadata) -> dict:
        return {
            "event_id": event.event_id, "event_type": event.event_type, "source": event.source,
            "runner_id": runner_id, "conversation_id": event.conversation_id or "",
            "thread_id": event.thread_id or "", "project_id": event.project_id or "",
            "actor_type": event.actor.actor_type, "actor_id": event.actor.actor_id or "",
            "subject_type": event.subject.subject_type if event.subject else "",
            "subject_id": (event.subject.subject_id if event.subject else "") or "",
            "input_summary": (event.input.text or "")[:1000],
            "input_json": event.input.model_dump(exclude_none=True),
            "metadata_json": metadata,
            **({"run_id": run_id} if run_id else {}),
        }

    @staticmethod
    def _user_transcript(event: AgentEventEnvelope) -> dict | None:
        if event.event_type != STEERING_EVENT_TYPE or not event.conversation_id:
            return None
        return {
            "conversation_id": event.conversation_id, "thread_id": event.thread_id or "",
            "project_id": event.project_id or "", "event_id": event.event_id, "role": "user",
            "author": "user", "content": ledger.transcript_text(event.input.text or ""),
            "content_json": {"role": "user", "contents": event.input.contents},
            "attachment_refs": [a.model_dump(exclude_none=True) for a in event.input.attachments],
            "metadata_json": {"actor_type": event.actor.actor_type,
                              "actor_id": event.actor.actor_id},
        }

    def _invoke(self, state: _RunState, payload: dict) -> AsyncIterator[dict]:
        descriptor = state.descriptor
        if descriptor.source == RunnerDescriptor.Source.BUILTIN:
            return builtins.BUILTIN_RUNNERS[descriptor.id]["run"](payload)
        item_timeout = (state.deadline - time.time() + 1.0) if state.deadline else NO_DEADLINE_ITEM_TIMEOUT
        return self.gateway.run_runner(descriptor, payload, max(item_timeout, 1.0))

    async def _stream(self, state: _RunState, payload: dict) -> AsyncIterator[RunMessage]:
        stream = self._invoke(state, payload)
        watcher = asyncio.ensure_future(self._watch_ledger_cancel(state))
        try:
            while True:
                try:
                    raw = await self._next_result(state, stream)
                except StopAsyncIteration:
                    break
                except _Stop as stop:
                    await self._finish(state, stop.status, stop.reason)
                    return
                message = await self._handle(state, raw)
                if message is not None:
                    yield message
            await self._finish(state, *self._ending(state))
        finally:
            watcher.cancel()
            # Closing the stream cancels the runner on the runtime's side.
            await stream.aclose()

    @staticmethod
    async def _next_result(state: _RunState, stream) -> dict:
        """The runner's next result; raises _Stop when the run must stop first."""
        if state.stop is None:
            loop_deadline = None
            if state.deadline is not None:
                loop_deadline = state.loop.time() + state.deadline - time.time()
            scope = state.waiting = asyncio.timeout_at(loop_deadline)
            try:
                async with scope:
                    return await anext(stream)
            except TimeoutError:
                if not scope.expired():
                    raise  # the stream's own timeout, not the run's
                state.stop = state.stop or (RunStatus.TIMEOUT,
                                            "runner.timeout: Agent runner timed out")
            finally:
                state.waiting = None
        raise _Stop(*state.stop)

    @staticmethod
    async def _watch_ledger_cancel(state: _RunState) -> None:
        """A cancel flagged in the ledger by another process (the admin, another server) stops
        the run within CANCEL_POLL_SECONDS."""
        while True:
            await asyncio.sleep(CANCEL_POLL_SECONDS)
            if await ledger.cancel_requested(state.run_id):
                run = await readers.run_outcome(state.run_id)
                _request_stop(state, RunStatus.CANCELLED,
                              run.get("status_reason") or "cancel_requested")
                return

    def _ending(self, state: _RunState) -> tuple[str, str]:
        if state.status:
            return state.status, state.reason
        return RunStatus.FAILED, "runner.protocol: the stream ended without run.completed or run.failed"

    def _failure_status(self, state: _RunState) -> str:
        if state.deadline is not None and time.time() >= state.deadline:
            return RunStatus.TIMEOUT
        return RunStatus.FAILED

    # --- one result ------------------------------------------------------------------------

    async def _handle(self, state: _RunState, raw) -> RunMessage | None:
        if not isinstance(raw, dict):
            self._host_event(state, "result.dropped", {"reason": "result is not an object"})
            return None
        sequence = self._runner_sequence(state, raw.get("sequence"))
        if sequence is None:
            return None
        type_ = raw.get("type")
        data = raw.get("data") if isinstance(raw.get("data"), dict) else {}
        usage = raw.get("usage") if isinstance(raw.get("usage"), dict) else None
        if not isinstance(type_, str) or not type_:
            self._append(state, "unknown", data, usage, sequence)
            raise ProtocolError("runner.protocol: a result arrived without a type")
        model = PAYLOAD_MODELS.get(type_)
        if model is None:
            logger.warning("run %s: unknown result type %r stored and ignored", state.run_id, type_)
            self._append(state, type_, data, usage, sequence)
            return None
        try:
            data = model.model_validate(data).model_dump(mode="json", exclude_none=type_ == "run.completed")
        except pydantic.ValidationError as exc:
            self._host_event(state, "result.dropped", {
                "reason": f"invalid {type_} payload", "runner_sequence": sequence,
                "errors": json.loads(exc.json(include_url=False, include_input=False)),
            })
            return None
        if raw.get("run_id") not in (None, state.run_id):
            raise ProtocolError(f"runner.protocol: a result names run {raw.get('run_id')!r}")
        if usage is not None:
            state.usage = usage
        state_write = transcript = None
        if type_ == "state.updated":
            state_write = await self._state_write(state, data)
        elif type_ in ("message.completed", "run.completed") and not state.transcript_written:
            transcript = self._assistant_transcript(state, data.get("message"))
        if type_ == "run.completed":
            state.status, state.reason = RunStatus.COMPLETED, data.get("finish_reason", "stop")
        elif type_ == "run.failed":
            code = data.get("code") or "runner.error"
            state.status = RunStatus.TIMEOUT if code == "runner.timeout" else RunStatus.FAILED
            state.reason = f"{code}: {data.get('error')}"
        terminal = type_ in ("run.completed", "run.failed") and not state.terminal_written
        state.terminal_written = state.terminal_written or terminal
        message = self._append(state, type_, data, usage, sequence, state_write=state_write,
                               transcript=transcript, finish=terminal)
        if type_ == "run.completed" and data.get("message"):
            return RunMessage(state.run_id, message.sequence, "message.completed",
                              {"message": data["message"], "file_ids": []}, usage)
        return message if type_ in DELIVERED_TYPES else None

    def _runner_sequence(self, state: _RunState, value) -> int | None:
        """Normalize the runner's sequence: None means the result is a duplicate, dropped."""
        if isinstance(value, bool) or not isinstance(value, int):
            if value is not None:
                logger.warning("run %s: non-integer sequence %r reassigned", state.run_id, value)
            value = state.last_runner_sequence + 1
        elif value <= 0:
            logger.warning("run %s: sequence %s reassigned", state.run_id, value)
            value = state.last_runner_sequence + 1
        elif value in state.seen_runner_sequences:
            logger.warning("run %s: duplicate sequence %s dropped", state.run_id, value)
            return None
        elif value != state.last_runner_sequence + 1:
            logger.warning("run %s: sequence gap before %s", state.run_id, value)
        state.seen_runner_sequences.add(value)
        state.last_runner_sequence = max(state.last_runner_sequence, value)
        return value

    async def _state_write(self, state: _RunState, data: dict) -> ledger.StateWrite | None:
        scope, key, value = data["scope"], data["key"], data["value"]
        problem = None
        if scope not in state.scopes:
            problem = f"state scope '{scope}' is not enabled for this run"
        else:
            try:
                size = len(json.dumps(value).encode())
            except (TypeError, ValueError):
                size, problem = 0, "state value is not JSON"
            if size > ledger.STATE_VALUE_MAX_BYTES:
                problem = f"state value is {size} bytes, over the 256 KiB limit"
        if problem:
            self._host_event(state, "state.rejected", {"scope": scope, "key": key,
                                                             "reason": problem})
            return None
        info = state.scopes[scope]
        return ledger.StateWrite(scope=scope, scope_key=info["scope_key"], state_key=key,
                                 value=value, identity=info["identity"])

    def _assistant_transcript(self, state: _RunState, message: dict | None) -> dict | None:
        if not message or not state.event.conversation_id:
            return None
        state.transcript_written = True
        return {
            "conversation_id": state.event.conversation_id,
            "thread_id": state.event.thread_id or "", "project_id": state.event.project_id or "",
            "event_id": state.event.event_id, "run_id": state.run_id,
            "runner_id": state.descriptor.id, "role": message.get("role") or "assistant",
            "author": state.agent_name or state.descriptor.id,
            "content": ledger.transcript_text(message.get("content")), "content_json": message,
        }

    def _append(self, state: _RunState, type_: str, data: dict, usage, runner_sequence,
                *, source=EventSource.RUNNER, state_write=None, transcript=None,
                finish: bool = False) -> RunMessage:
        """Queue one event (and, for a terminal result, the run's end) for the journal."""
        state.ledger_sequence += 1
        metadata = {"runner_sequence": runner_sequence} if runner_sequence is not None else {}
        message = RunMessage(state.run_id, state.ledger_sequence, type_, data, usage)
        state.journal.add(
            ledger.ResultWrite(
                sequence=state.ledger_sequence, type=type_, data=data, usage=usage,
                source=source, metadata=metadata, state=state_write, transcript=transcript,
                finish=(state.status, state.reason, state.usage, state.steers) if finish else None),
            {**message.as_dict(), "source": source},
        )
        return message

    def _host_event(self, state: _RunState, type_: str, data: dict) -> None:
        logger.warning("run %s: %s %s", state.run_id, type_, data.get("reason", ""))
        self._append(state, type_, data, None, None, source=EventSource.HOST)

    async def _publish(self, run_id: str, event: dict) -> None:
        await self.channel_layer.group_send(f"run.{run_id}", {"type": "run.event", "event": event})

    async def _finish(self, state: _RunState, status: str, reason: str) -> None:
        """Wait for the journal, then end the run (unless its terminal result already did)."""
        if state.finished:
            return
        try:
            ended = await state.journal.drain()
        except Exception as exc:
            logger.exception("run %s: writing its results failed", state.run_id)
            ended, status, reason = None, RunStatus.FAILED, f"ledger write failed: {exc}"
        if ended is None:
            ended = await ledger.finish_run(state.run_id, status, reason, state.usage, state.steers)
        await self._published_end(state, *ended)

    async def _published_end(self, state: _RunState, status: str, reason: str) -> None:
        state.finished = True
        await self._publish(state.run_id, {"type": "run.status", "run_id": state.run_id,
                                           "status": status, "status_reason": reason,
                                           "sequence": state.ledger_sequence})

    async def _replay(self, run_id: str | None) -> AsyncIterator[RunMessage]:
        """The outcome of a run already started for this event: its delivered messages."""
        if run_id is None:
            return
        for event in await readers.run_events(run_id, wait_terminal=True):
            if event["type"] in DELIVERED_TYPES:
                yield RunMessage(run_id, event["sequence"], event["type"], event["data"],
                                 event["usage"])

