"""What the orchestrator writes to the ledger: a run's start, its results, the rows of an event.

`start_run` creates the run row with the event log row and the user's transcript entry;
`Journal` then writes the run's results by group commit, beside the run loop, and
`GroupCommit` commits what the runs of the process write at the same time together.
"""

import asyncio
import time
import weakref
from datetime import UTC, datetime

from ledger.services import runs as ledger
from runners.execution import context
from runners.grants.llm import NO_GRANTS, ModelGrants
from runners.models import RunnerDescriptor
from runners.observability import metrics
from runners.protocol import AgentBinding, AgentEventEnvelope

# The events that carry a user's message: they are transcribed, and they may steer a run.
MESSAGE_EVENT_TYPE = "message.received"
# How long a result may wait for the next ones when nobody waits on it (see `Journal`).
LINGER_SECONDS = 0.05
# How long a run's start may wait to be written with its first results (see `Journal`):
# longer, and the admin, the reaper and another message of its conversation miss it.
START_PATIENCE_SECONDS = 0.02


class Journal:
    """Writes one run's results to the ledger, in order, by group commit.

    A result is written once something waits for it: its caller (`durable`: the run loop
    delivers a message only once it is committed, so a crash never loses what a caller saw),
    the run's end (a terminal result, or `drain()`), or LINGER_SECONDS passing. Until then the
    results after it join it, and what arrives while a write is under way joins the next: a
    short run takes one or two transactions, not one per result. A transaction's events are
    published to live viewers together once committed, so they see a result nobody waits for
    up to LINGER_SECONDS late.

    `wait_durable=False`: the run's caller shows nothing before the run has ended; `durable`
    then lets its messages through at once, and the run still ends only once everything is
    committed.

    A `start` kept back (`ledger.PendingStart`) is written with the first results, or alone
    once START_PATIENCE_SECONDS passed: a run that ends at once is one transaction.
    """

    def __init__(self, run_id: str, publish, wait_durable: bool = True,
                 start: ledger.PendingStart | None = None):
        self.run_id = run_id
        self.publish = publish
        self.wait_durable = wait_durable
        self.start = start
        self.start_due = False
        self.start_timer = (asyncio.get_running_loop().call_later(
            START_PATIENCE_SECONDS, self._start_over) if start is not None else None)
        self.pending: list[tuple[ledger.ResultWrite, dict]] = []
        self.model_calls: list[dict] = []
        self.writer: asyncio.Task | None = None
        self.lingering: asyncio.TimerHandle | None = None
        self.error: Exception | None = None
        self.ended: dict | None = None  # the run's outcome, once a result ended it
        self.committed_sequence = 0
        self.awaited_sequence = 0  # the last one a `durable` caller waits for
        self.draining = False
        self._committed = asyncio.Event()

    def add(self, write: ledger.ResultWrite, frame: dict) -> None:
        if self.error is not None:
            raise self.error
        self.pending.append((write, frame))
        self._kick()

    def add_model_call(self, row: dict) -> None:
        """A model call of this run (a `ModelCall` row), written with the run's results: one
        transaction, so it never waits on them for the database's one writer (SQLite), and
        the run's end, written after it, sums it into the run's usage."""
        if self.error is not None:
            raise self.error
        self.model_calls.append(row)
        self._kick()

    def _due(self) -> bool:
        return (self.draining or self.start_due
                or self.awaited_sequence > self.committed_sequence
                or any(write.finish is not None for write, _ in self.pending))

    def _start_over(self) -> None:
        self.start_timer = None
        self.start_due = True
        self._kick()

    def _kick(self, flush: bool = False) -> None:
        """Write what is pending if it is due (or `flush`), else within LINGER_SECONDS; a
        write under way takes it when it ends."""
        if self.error is not None or (self.writer is not None and not self.writer.done()):
            return
        if flush or self._due():
            if self.lingering is not None:
                self.lingering.cancel()
                self.lingering = None
            self.writer = asyncio.ensure_future(self._write())
        else:
            self._linger()

    def _linger(self) -> None:
        if self.lingering is None and (self.pending or self.model_calls):
            self.lingering = asyncio.get_running_loop().call_later(
                LINGER_SECONDS, self._linger_over)

    def _linger_over(self) -> None:
        self.lingering = None
        self._kick(flush=True)

    async def durable(self, sequence: int) -> None:
        """Wait until the result of ledger `sequence` is committed."""
        if not self.wait_durable:
            return
        self.awaited_sequence = max(self.awaited_sequence, sequence)
        self._kick()
        while self.committed_sequence < sequence:
            if self.error is not None:
                raise self.error
            await self._committed.wait()

    async def drain(self) -> dict | None:
        """Wait until everything is written; the run's outcome if a result ended it."""
        self.draining = True
        self._kick()
        if self.writer is not None:
            await asyncio.shield(self.writer)
        if self.error is not None:
            raise self.error
        return self.ended

    async def write_start(self) -> None:
        """Write the run's rows now if they were kept back: something asks for the run."""
        while self.start is not None and self.error is None:
            self.start_due = True
            self._kick()
            if self.writer is not None:
                await asyncio.shield(self.writer)
        if self.error is not None:
            raise self.error

    def _wake(self) -> None:
        self._committed.set()
        self._committed = asyncio.Event()

    async def _write(self) -> None:
        try:
            flush = True  # what started this write is due, or lingered long enough
            while (self.pending or self.model_calls or self.start) and (flush or self._due()):
                flush = False
                batch, self.pending = self.pending, []
                calls, self.model_calls = self.model_calls, []
                start, self.start, self.start_due = self.start, None, False
                if self.start_timer is not None:
                    self.start_timer.cancel()
                    self.start_timer = None
                began = time.perf_counter()
                ended = await group_commit().record(ledger.RunResults(
                    self.run_id, [write for write, _ in batch], calls, start))
                metrics.JOURNAL_COMMITS.observe(time.perf_counter() - began)
                if batch:
                    self.committed_sequence = batch[-1][0].sequence
                self.ended = ended or self.ended
                self._wake()
                if batch:
                    await self.publish([frame for _, frame in batch])
            self._linger()
        except Exception as exc:  # surfaced by the next add(), durable() or drain()
            self.error = exc
            self._wake()


class GroupCommit:
    """Commits the results of the runs of one event loop: what runs write while a transaction
    is under way waits for it, and then goes in one transaction for all of them, not one each
    (a busy process commits a few runs at a time; an idle one, each at once).

    A batch that fails is written again run by run, so one run's bad write fails that run
    alone."""

    def __init__(self):
        self.queue: list[tuple[ledger.RunResults, asyncio.Future]] = []
        self.writer: asyncio.Task | None = None

    async def record(self, results: ledger.RunResults) -> dict | None:
        """Write `results` (see `ledger.record_results`); the run's outcome if they ended it."""
        written = asyncio.get_running_loop().create_future()
        self.queue.append((results, written))
        if self.writer is None:
            self.writer = asyncio.ensure_future(self._write())
        return await asyncio.shield(written)

    async def _write(self) -> None:
        batch = []
        try:
            while self.queue:
                batch, self.queue = self.queue, []
                if len(batch) > 1:
                    try:
                        outcomes = await ledger.record_many([results for results, _ in batch])
                    except Exception:
                        pass  # each on its own below
                    else:
                        for (_, written), outcome in zip(batch, outcomes, strict=True):
                            written.set_result(outcome)
                        continue
                for results, written in batch:
                    try:
                        written.set_result(await ledger.record_results(
                            results.run_id, results.writes, results.model_calls, results.start))
                    except Exception as exc:
                        written.set_exception(exc)
        except asyncio.CancelledError:  # the loop is going away: nobody waits for ever
            for _, written in batch + self.queue:
                if not written.done():
                    written.cancel()
            self.queue = []
            raise
        finally:
            self.writer = None


_group_commits: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, GroupCommit]" = \
    weakref.WeakKeyDictionary()


def group_commit() -> GroupCommit:
    """The running loop's `GroupCommit`."""
    loop = asyncio.get_running_loop()
    commit = _group_commits.get(loop)
    if commit is None:
        commit = _group_commits[loop] = GroupCommit()
    return commit


# The part of a run's authorization snapshot that is its own (the rest, its binding's, is
# kept once for all the runs that share it).
RUN_OWN_AUTHORIZATION = ("state_context", "conversation_id", "thread_id", "project_id")


async def start_run(run_id: str, event: AgentEventEnvelope, binding: AgentBinding,
                    descriptor: RunnerDescriptor, apis, scopes: dict, deadline: float | None,
                    agent_name: str, owner_id: str,
                    grants: ModelGrants = NO_GRANTS, tools: list[dict] = (),
                    knowledge: list[dict] = (), skills: list[dict] = (),
                    turn: str | None = None, defer: bool = False) -> ledger.StartedRun:
    """Create the `running` row, leased to `owner_id`; returns the state snapshot of `scopes`
    and, for a runner that may page the history, its latest cursor. With a `turn`, a run of a
    busy conversation is refused or queued instead; with `defer`, the row is kept back for
    the run's `Journal` to write (`ledger.start_run`).

    Raises `ledger.DuplicateEvent` when the event was received before.
    """
    deadline_at = datetime.fromtimestamp(deadline, UTC) if deadline else None
    snapshot = context.authorization_snapshot(event, binding, descriptor, apis, scopes, grants,
                                              tools, knowledge, skills)
    return await ledger.start_run(
        grants={key: value for key, value in snapshot.items()
                if key not in RUN_OWN_AUTHORIZATION},
        run={
            "run_id": run_id, "event_id": event.event_id, "agent_id": event.agent_id or "",
            "actor_type": event.actor.actor_type, "actor_id": event.actor.actor_id or "",
            "binding_id": binding.binding_id, "runner_id": descriptor.id,
            "parent_run_id": event.parent_run_id or "",
            "conversation_id": event.conversation_id or "",
            "thread_id": event.thread_id or "", "project_id": event.project_id or "",
            "deadline_at": deadline_at,
            "authorization_json": {key: snapshot[key] for key in RUN_OWN_AUTHORIZATION},
            # The input itself is the event log's (`event_id`): not copied here.
            "metadata_json": {"event_type": event.event_type, "source": event.source,
                              "agent_name": agent_name},
        },
        event_log=event_log_row(event, None, descriptor.id),
        user_transcript=user_transcript_row(event),
        owner_id=owner_id,
        scope_keys={scope: info["scope_key"] for scope, info in scopes.items()},
        history_of=_history_of(event, apis),
        turn=turn,
        defer=defer,
        # A queued run keeps its event: another process starts it if this one goes away.
        queued_event=event.model_dump(mode="json") if turn else None,
    )


def _history_of(event: AgentEventEnvelope, apis) -> tuple[str, str] | None:
    return (event.conversation_id, event.thread_id or "") if apis.get("history_page") else None


async def promote_queued(run_id: str, event: AgentEventEnvelope, apis, scopes: dict,
                         owner_id: str, deadline: float | None) -> ledger.StartedRun | str | None:
    """The queued run's turn, if it came (see `ledger.promote_queued`)."""
    return await ledger.promote_queued(
        run_id, owner_id, user_transcript_row(event),
        {scope: info["scope_key"] for scope, info in scopes.items()}, _history_of(event, apis),
        datetime.fromtimestamp(deadline, UTC) if deadline else None)


def input_record(event: AgentEventEnvelope) -> dict:
    """The event's input as the event log keeps it: a message's `contents` that only repeat
    its text are kept once, as `text`."""
    data = event.input.model_dump(exclude_none=True)
    if data.get("contents") == [{"type": "text", "text": data.get("text")}]:
        del data["contents"]
    return data


def event_log_row(event: AgentEventEnvelope, run_id, runner_id, **metadata) -> dict:
    return {
        "event_id": event.event_id, "idempotency_key": event.ledger_key,
        "event_type": event.event_type, "source": event.source, "runner_id": runner_id, "conversation_id": event.conversation_id or "",
        "thread_id": event.thread_id or "", "project_id": event.project_id or "",
        "actor_type": event.actor.actor_type, "actor_id": event.actor.actor_id or "",
        "subject_type": event.subject.subject_type if event.subject else "",
        "subject_id": (event.subject.subject_id if event.subject else "") or "",
        "input_summary": (event.input.text or "")[:1000],
        "input_json": input_record(event),
        "metadata_json": metadata,
        **({"run_id": run_id} if run_id else {}),
    }


def assistant_transcript_row(event: AgentEventEnvelope, run_id: str, runner_id: str,
                             author: str, message: dict) -> dict:
    """A runner's reply in the transcript: the assistant's turn whatever role its message
    claims (a "user" one would speak for the conversation's user to the agents after it)."""
    return {
        "conversation_id": event.conversation_id, "thread_id": event.thread_id or "",
        "project_id": event.project_id or "", "event_id": event.event_id, "run_id": run_id,
        "runner_id": runner_id, "role": "assistant", "author": author,
        "content": ledger.transcript_text(message.get("content")), "content_json": message,
    }


def user_transcript_row(event: AgentEventEnvelope) -> dict | None:
    if event.event_type != MESSAGE_EVENT_TYPE or not event.conversation_id:
        return None
    return {
        "conversation_id": event.conversation_id, "thread_id": event.thread_id or "",
        "project_id": event.project_id or "", "event_id": event.event_id, "role": "user",
        "author": "user", "content": ledger.transcript_text(event.input.text or ""),
        "content_json": {"role": "user", "content": event.input.contents},  # LangBot's shape
        "attachment_refs": [a.model_dump(exclude_none=True) for a in event.input.attachments],
        "metadata_json": {"actor_type": event.actor.actor_type,
                          "actor_id": event.actor.actor_id},
    }
