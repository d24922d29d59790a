"""What the orchestrator writes to the ledger: a run's start, its results, the rows of an event.

`start_run` creates the run row with the event log row and the user's transcript entry;
`Journal` then writes the run's results in batches, off the run loop's critical path.
"""

import asyncio
from datetime import UTC, datetime

from ledger.services import runs as ledger
from runners.execution import context
from runners.execution.grants import NO_GRANTS, ModelGrants
from runners.execution.protocol import AgentBinding, AgentEventEnvelope
from runners.models import RunnerDescriptor

# How long a result may wait to share its ledger write with the ones after it; the run's end
# is written at once.
JOURNAL_LINGER_SECONDS = 0.05
# The events that carry a user's message: they are transcribed, and they may steer a run.
MESSAGE_EVENT_TYPE = "message.received"


class Journal:
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


async def start_run(run_id: str, event: AgentEventEnvelope, binding: AgentBinding,
                    descriptor: RunnerDescriptor, apis, scopes: dict, deadline: float | None,
                    agent_name: str, owner_id: str,
                    grants: ModelGrants = NO_GRANTS, tools: list[dict] = ()) -> dict[str, dict]:
    """Create the `running` row, leased to `owner_id`; returns the state snapshot of `scopes`.

    Raises `ledger.DuplicateEvent` when the event was received before.
    """
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
                                                                 apis, scopes, grants, tools),
            "metadata_json": {"event_type": event.event_type, "source": event.source,
                              "agent_name": agent_name,
                              "input": event.input.model_dump(exclude_none=True)},
        },
        event_log=event_log_row(event, None, descriptor.id),
        user_transcript=user_transcript_row(event),
        owner_id=owner_id,
        scope_keys={scope: info["scope_key"] for scope, info in scopes.items()},
    )


def event_log_row(event: AgentEventEnvelope, run_id, runner_id, **metadata) -> dict:
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


def user_transcript_row(event: AgentEventEnvelope) -> dict | None:
    if event.event_type != MESSAGE_EVENT_TYPE or not event.conversation_id:
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
