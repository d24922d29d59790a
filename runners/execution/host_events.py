"""What the host does for a run while it streams, written into the run: its tool calls (host
events), the replies a runner sends through it (LangBot's `event_reply`), and the model calls
made on the run's own loop (written with its results).

Both act only when the run streams in this process and has not ended, and they act on the
run's own loop, which owns its sequence and journal.
"""

import asyncio

from ledger.models import EventSource
from runners.execution.orchestrator import Orchestrator
from runners.execution.process import host_process


def record(run_id: str, type_: str, data: dict) -> None:
    """Record what the host did for the run (a tool call it asked for) as a host event."""
    state = host_process().active_runs.get(run_id)
    if state is None:
        return

    def append() -> None:
        if not state.finished and not state.terminal_written:
            Orchestrator._append(state, type_, data, None, None, source=EventSource.HOST)

    state.loop.call_soon_threadsafe(append)


def reply(run_id: str, message: dict) -> bool:
    """Record `message` like a `message.completed` of the run (transcript included) and deliver
    it to the caller before the runner's next result. False when the run does not stream here.
    """
    state = host_process().active_runs.get(run_id)
    if state is None or state.finished or state.terminal_written:
        return False

    def append() -> None:
        if state.finished or state.terminal_written:
            return
        transcript = Orchestrator._assistant_transcript(state, message)
        state.replied = True
        state.host_replies.append(Orchestrator._append(
            state, "message.completed", {"message": message, "file_ids": []}, None, None,
            source=EventSource.HOST, transcript=transcript))

    state.loop.call_soon_threadsafe(append)
    return True


def journal_model_call(run_id: str, row: dict) -> bool:
    """Hand the `ModelCall` row to the run's journal when the call was made on the run's own
    loop (the built-in agent's); False when the caller must write it itself."""
    state = host_process().active_runs.get(run_id)
    if state is None or state.finished or state.terminal_written or state.journal is None:
        return False
    try:
        on_its_loop = asyncio.get_running_loop() is state.loop
    except RuntimeError:
        on_its_loop = False
    if on_its_loop:
        state.journal.add_model_call(row)
    return on_its_loop
