"""Steering: a message for a conversation whose active run steers joins that run.

The message becomes a steering item the run pulls (`steering.pull`) instead of a run of its
own. Only a message the active run could have been sent itself joins it: the same
conversation and thread, of the same actor, through the same binding, to the same runner.
The active run is found in the ledger, so a message joins it whichever process executes it
and whichever process received the message.
"""

import time

from ledger.selectors import runs as readers
from ledger.services import steering as steering_queue
from runners.execution.journal import MESSAGE_EVENT_TYPE, event_log_row, user_transcript_row
from runners.models import RunnerDescriptor
from runners.protocol import AgentBinding, AgentEventEnvelope


async def try_steer(event: AgentEventEnvelope, binding: AgentBinding,
                    descriptor: RunnerDescriptor) -> str | None:
    """Queue `event` for the oldest active run it joins.

    Returns the id of the run that took it, or None when a run of its own should start.
    """
    if not (event.event_type == MESSAGE_EVENT_TYPE and event.conversation_id
            and (descriptor.capabilities or {}).get("steering")):
        return None
    active_runs = await readers.active_runs_of_conversation(
        runner_id=descriptor.id, binding_id=binding.binding_id,
        conversation_id=event.conversation_id, thread_id=event.thread_id or "",
        actor_type=event.actor.actor_type, actor_id=event.actor.actor_id or "")
    for run_id in active_runs:
        queued = await steering_queue.enqueue_steering(
            run_id, event.event_id, _item(run_id, event, descriptor),
            event_log=event_log_row(event, run_id, descriptor.id,
                                    steering={"status": "queued", "claimed_by_run_id": run_id}),
            user_transcript=user_transcript_row(event),
        )
        if queued:
            return run_id
    return None


def _item(run_id: str, event: AgentEventEnvelope, descriptor: RunnerDescriptor) -> dict:
    """What the run pulls: the message with where it came from."""
    return {
        "claimed_run_id": run_id, "runner_id": descriptor.id,
        "claimed_at": int(time.time()),
        "event": {"event_id": event.event_id, "event_type": event.event_type,
                  "event_time": event.event_time, "source": event.source},
        "conversation": {"conversation_id": event.conversation_id,
                         "thread_id": event.thread_id},
        "actor": event.actor.model_dump(),
        "input": event.input.model_dump(exclude_none=True),
    }
