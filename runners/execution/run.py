"""A run while it executes: what the run loop tracks (`RunState`), how an event joins the
run's ledger (`RunState.append`), and the handle the run gives to everything that acts on it
from outside the loop (`LocalRunHandle`).

The run's loop owns its sequence and its journal: a handle called from another thread or loop
hands its work to that loop.
"""

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.conf import settings

from ledger import wire
from ledger.models import EventSource, RunStatus
from ledger.services import runs as ledger
from ledger.services import state as runner_state
from runners.catalogue.agent_routing import TRANSFER_TOOL
from runners.execution import journal
from runners.execution.journal import Journal
from runners.execution.results import request_stop
from runners.models import RunnerDescriptor
from runners.protocol import AgentBinding, AgentEventEnvelope
from runners.runtime.loop_bound import submit

logger = logging.getLogger(__name__)
# A runner's results as it calls a tool (the SDK's runner API sends them for every call).
TOOL_CALL_TYPES = ("tool.call.started", "tool.call.completed")


@dataclass
class RunMessage:
    """One message delivered to the caller, with its ledger sequence."""

    run_id: str
    sequence: int
    type: str
    data: dict
    usage: dict | None = None

    def as_dict(self) -> dict:
        return wire.run_message(run_id=self.run_id, sequence=self.sequence, type_=self.type,
                                data=self.data, usage=self.usage)


class OutputLimit(Exception):
    """The run's events outgrew what one run may store; the run fails with this reason."""


@dataclass
class RunState:
    """What the loop tracks for one run while it streams."""

    run_id: str
    event: AgentEventEnvelope
    binding: AgentBinding
    descriptor: RunnerDescriptor
    scopes: dict
    deadline: float | None
    agent_name: str
    journal: Journal
    seen_runner_sequences: set = field(default_factory=set)
    last_runner_sequence: int = 0
    ledger_sequence: int = 0
    status: str | None = None
    reason: str = ""
    usage: dict | None = None
    terminal_written: bool = False
    finished: bool = False
    # The text of the run's deltas so far: the reply of a runner that sends no message.
    delta_text: str = ""
    replied: bool = False
    # What the run's events take in the ledger so far (their JSON), against the cap: the
    # runner's results and what the host records for it alike.
    stored_bytes: int = 0
    # Only a run granted models can have model calls to sum into its usage at the end.
    calls_models: bool = True
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.get_running_loop)
    # (status, reason) once the run must stop (cancelled, deadline); the wait for the runner's
    # next result, while one is under way, is cut short through `waiting`.
    stop: tuple[str, str] | None = None
    waiting: asyncio.Timeout | None = None
    # Replies the runner sent through the host (`event_reply`), for the caller's stream.
    host_replies: list = field(default_factory=list)
    began: float = field(default_factory=time.monotonic)
    # Seconds from `began` to the first streamed text, once it came.
    first_token_after: float | None = None

    @property
    def steers(self) -> bool:
        return bool((self.descriptor.capabilities or {}).get("steering"))

    @property
    def takes_events(self) -> bool:
        """Whether an event may still join the run (its end is not written yet)."""
        return not (self.finished or self.terminal_written)

    def append(self, type_: str, data: dict, usage, runner_sequence, *,
               source=EventSource.RUNNER, state_write=None, transcript=None,
               finish: bool = False) -> RunMessage:
        """Queue one event (and, for a terminal result, the run's end) for the journal.
        Raises OutputLimit, queueing nothing, when it would take the run past its cap."""
        self._take_room(data, usage)
        self.ledger_sequence += 1
        metadata = {"runner_sequence": runner_sequence} if runner_sequence is not None else {}
        message = RunMessage(self.run_id, self.ledger_sequence, type_, data, usage)
        arrived = datetime.now(UTC)
        self.journal.add(
            ledger.ResultWrite(
                sequence=self.ledger_sequence, type=type_, data=data, usage=usage,
                source=source, metadata=metadata, state=state_write, transcript=transcript,
                finish=(self.status, self.reason, self.usage, self.steers,
                        self.calls_models) if finish else None, created_at=arrived),
            wire.run_event(run_id=self.run_id, sequence=self.ledger_sequence, type_=type_,
                           data=data, usage=usage, source=source, created_at=arrived))
        return message

    def _take_room(self, data, usage) -> None:
        size = len(json.dumps(data, default=str)) + (
            len(json.dumps(usage, default=str)) if usage else 0)
        if self.stored_bytes + size > settings.LANGHOST_RUN_MAX_STORED_BYTES:
            raise OutputLimit(f"run.output_limit: the run's results passed "
                              f"{settings.LANGHOST_RUN_MAX_STORED_BYTES} bytes; it was stopped")
        self.stored_bytes += size

    def host_event(self, type_: str, data: dict) -> RunMessage:
        """Record what the host did for the run, or refused it."""
        # The run's timeline records it; the log only mirrors it (a runner may do this often).
        logger.info("run %s: %s %s", self.run_id, type_, data.get("reason", ""))
        return self.append(type_, data, None, None, source=EventSource.HOST)

    def host_reply(self, message: dict) -> None:
        """A reply the runner sent through the host: a `message.completed` of the run, for its
        transcript and its caller."""
        self.replied = True
        self.host_replies.append(self.append(
            "message.completed", {"message": message, "file_ids": []}, None, None,
            source=EventSource.HOST, transcript=self.assistant_transcript(message)))

    def follow_transfer(self, data: dict) -> None:
        """After `transfer_to_agent`, the target answers: it is the reply's author, so the
        conversation's next message goes to it (agent-tree routing reads the authors)."""
        result = data.get("result")
        if data.get("tool_name") == TRANSFER_TOOL and isinstance(result, dict) \
                and isinstance(result.get("agent_name"), str) and not data.get("error"):
            self.agent_name = result["agent_name"]

    def state_write(self, data: dict) -> runner_state.StateWrite | None:
        """The runner's `state.updated`, checked against the run's scopes and the value
        limit; None (and a `state.rejected` event) when refused."""
        scope, key, value = data["scope"], data["key"], data["value"]
        problem = None
        if scope not in self.scopes:
            problem = f"state scope '{scope}' is not enabled for this run"
        else:
            try:
                size = runner_state.value_size(value)
            except (TypeError, ValueError):
                size, problem = 0, "state value is not JSON"
            if size > runner_state.STATE_VALUE_MAX_BYTES:
                problem = (f"state value is {size} bytes, over the "
                           f"{runner_state.STATE_VALUE_LIMIT} limit")
        if problem:
            self.host_event("state.rejected", {"scope": scope, "key": key, "reason": problem})
            return None
        info = self.scopes[scope]
        return runner_state.StateWrite(scope=scope, scope_key=info["scope_key"], state_key=key,
                                       value=value, identity=info["identity"])

    def assistant_transcript(self, message: dict | None) -> dict | None:
        """A reply of the run, as a line of the conversation's transcript (each reply is one:
        the next turn's history holds them all)."""
        if not message or not self.event.conversation_id:
            return None
        return journal.assistant_transcript_row(self.event, self.run_id, self.descriptor.id,
                                                self.agent_name or self.descriptor.id, message)


class LocalRunHandle:
    """The handle of a run executing in this process (see `runners.runtime.run_handle`)."""

    def __init__(self, state: RunState):
        self._state = state
        self.run_id = state.run_id
        # The plugins that listen to the run's events (`runners.execution.listeners`), once
        # the orchestrator looked; None when none does.
        self.listeners = None
        # LangBot's query variables of the run (`runners.hostapi.query_api`).
        self.query_vars: dict = {}
        # How the run starts its steps (`runners.execution.children.Children`).
        self.children = None

    def _on_run_loop(self, act) -> bool:
        state = self._state
        if not state.takes_events:
            return False

        def apply() -> None:
            if state.takes_events:
                try:
                    act(state)
                except OutputLimit as exc:  # what the host records for it stops it too
                    request_stop(state, RunStatus.FAILED, str(exc))

        try:
            state.loop.call_soon_threadsafe(apply)
        except RuntimeError:  # its loop closed: the run is over
            return False
        return True

    async def record(self, type_: str, data: dict) -> bool:
        return self._on_run_loop(lambda state: state.host_event(type_, data))

    async def reply(self, message: dict) -> bool:
        return self._on_run_loop(lambda state: state.host_reply(message))

    async def run_child(self, agent_type_id: str, name: str, text: str, variables: dict,
                        extra_config: dict | None = None) -> dict:
        return await self.children.run(agent_type_id, name, text, variables,
                                       extra_config or {})

    def heard_by(self, plugin: str) -> bool:
        return self.listeners is not None and plugin in self.listeners.plugins

    async def prompt(self, system: list[dict], history: list[dict]) -> tuple[list[dict],
                                                                              list[dict]]:
        if self.listeners is None:
            return system, history
        return await self.listeners.prompt(system, history)

    def journal_model_call(self, row: dict) -> bool:
        state = self._state
        try:
            on_its_loop = asyncio.get_running_loop() is state.loop
        except RuntimeError:
            on_its_loop = False
        if on_its_loop and state.takes_events:
            state.journal.add_model_call(row)
            return True
        return False

    def stop(self, status: str, reason: str) -> None:
        self._state.loop.call_soon_threadsafe(request_stop, self._state, status, reason)

    async def written(self) -> None:
        journal = self._state.journal
        if journal.start is None:
            return
        if asyncio.get_running_loop() is self._state.loop:
            await journal.write_start()
        else:
            await asyncio.wrap_future(submit(journal.write_start(), self._state.loop))
