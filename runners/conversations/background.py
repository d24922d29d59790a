"""Runs no request waits for: background runs, and queued runs whose process went away.

A background run goes on on this process's loop when its caller leaves. A queued run waits
for its turn in its conversation in the process that received its message; when that
process goes away (its lease runs out, or it is a process of this host that no longer runs),
the process that owns work (`runners.work`) adopts it and starts it, its
binding resolved again through the door.
"""

import asyncio
import logging

from asgiref.sync import sync_to_async

from ledger.models import AgentRun, RunStatus
from ledger.selectors import runs as run_selectors
from ledger.services import runs as ledger
from runners.conversations import services as door
from runners.conversations import targets
from runners.conversations.callers import is_superuser_now
from runners.conversations.exceptions import Refused
from runners.models import AgentInstance
from runners.plugins import command_registry
from runners.protocol import ENQUEUE, AgentEventEnvelope
from runners.runtime.host_process import host_process

logger = logging.getLogger(__name__)

# Background runs, referenced until they end (the loop keeps only weak references to tasks).
_background: set[asyncio.Task] = set()
# How long a background start waits for its run's row (looked for at this pace) before it
# answers with the run queued.
BACKGROUND_START_SECONDS = 30.0
BACKGROUND_POLL_SECONDS = 0.02


def _keep(task: asyncio.Task) -> asyncio.Task:
    _background.add(task)
    task.add_done_callback(_background.discard)
    return task


async def start_in_background(prepared: door.PreparedRun) -> dict:
    """Start the run on this process's loop, apart from the request: it goes on when the
    caller leaves, and ends in the ledger as any run does (a shutdown cancels it as it does
    the others). Returns once its row exists, with `{run_id, status, conversation_id,
    event_id}` (`queued` while it waits its turn in its conversation); the outcome of a run
    that ended already (a replayed event, a message absorbed by steering). Raises RunRefused
    if the run cannot start."""
    # Announced: its caller learns the id at once, so its row is written before the runner
    # starts, not with the first results (which a model may take seconds to give).
    task = _keep(asyncio.create_task(door.run_to_end(prepared, announced=True)))
    give_up = asyncio.get_running_loop().time() + BACKGROUND_START_SECONDS
    while not task.done():
        status = await run_selectors.run_status(prepared.run_id)
        if status is not None:
            return _started(prepared, status)
        if asyncio.get_running_loop().time() > give_up:
            break
        await asyncio.sleep(BACKGROUND_POLL_SECONDS)
    if task.done():
        return task.result()  # the refusal, if it was refused
    # Slow to start (a runtime restarting): it goes on; the caller follows its id.
    return _started(prepared, RunStatus.QUEUED)


def _started(prepared: door.PreparedRun, status: str) -> dict:
    return prepared.public({"run_id": prepared.run_id, "status": status,
                            "conversation_id": prepared.event.conversation_id,
                            "event_id": prepared.event.event_id})


async def resume_orphaned_runs() -> list[str]:
    """Adopt and start, in the background, the queued runs nobody waits for any more; a run
    that cannot start now (its agent gone, paused, its runner away) ends `failed` with why.
    Returns the ids of the runs adopted."""
    adopted = []
    owner_id = host_process().owner_id
    for run in await sync_to_async(ledger.orphaned_queued_runs_sync)():
        if not await sync_to_async(ledger.adopt_queued_sync)(
                run.run_id, run.execution_owner_id, owner_id):
            continue  # another process adopted it first
        adopted.append(run.run_id)
        try:
            prepared = await sync_to_async(_prepared_again)(run)
        except (Refused, ValueError) as exc:
            await ledger.finish_run(run.run_id, RunStatus.FAILED,
                                    f"host.gone: its process went away, and it cannot start "
                                    f"here: {exc}")
            continue
        logger.info("run %s: its process went away while it was queued; started here",
                    run.run_id)
        _keep(asyncio.create_task(door.run_to_end(prepared)))
    return adopted


def _prepared_again(run: AgentRun) -> door.PreparedRun:
    """The queued run, prepared as its message was: its event as received, its agent's
    binding as it is now."""
    event = run.metadata_json.get("queued_event")
    agent = AgentInstance.objects.select_related("agent_type").filter(
        pk=run.agent_id or None).first()
    if not event or agent is None:
        raise ValueError("only an agent's queued message is started elsewhere")
    door.require_taking_messages(agent)
    tree, node = targets.answering_node(agent, run.conversation_id)
    binding = targets.node_binding(agent, tree, node, run.conversation_id)
    envelope = AgentEventEnvelope.model_validate(event)
    if command_registry.is_command_id(run.runner_id):
        # Started for a command: that command runs (or the run fails, if it is gone), with
        # the sender's privilege as it is now.
        binding = targets.queued_command_binding(agent, binding, run.runner_id,
                                                 is_superuser_now(envelope.actor))[0]
    targets.require_runner(binding.runner_id)  # what it takes was checked when it came
    return door.PreparedRun(event=envelope, binding=binding,
                            run_id=run.run_id, agent=agent, agent_name=node.name,
                            multitask=ENQUEUE, queued=True)
