"""A run's steps: runs of their own, each with the run as its parent (`parent_run_id`), run
to their end through the same orchestrator, within the parent's deadline. A workflow's
runner starts them through its handle (`RunHandle.run_child`); cancelling the parent closes
the step under way, which cancels it."""

import time
from collections.abc import Awaitable, Callable

from asgiref.sync import sync_to_async

from ledger.models import RunStatus
from ledger.selectors import runs as readers
from runners.catalogue.bindings import StepRefused, step_binding
from runners.execution.run import RunState
from runners.protocol import AgentBinding, AgentEventEnvelope

# What a step is given when its parent has no deadline.
STEP_TIMEOUT_SECONDS = 300.0
STEP_EVENT = "workflow.step"
# How deep steps may nest (a workflow of workflows, an agent tool calling another): deeper is
# a workflow or agent tool that calls itself.
MAX_DEPTH = 8


class Children:
    def __init__(self, run_to_end: Callable[..., Awaitable[dict]], state: RunState):
        self.run_to_end = run_to_end
        self.state = state

    def _timeout(self) -> float:
        if self.state.deadline is None:
            return STEP_TIMEOUT_SECONDS
        return max(self.state.deadline - time.time(), 0.1)

    async def run(self, agent_type_id: str, name: str, text: str, variables: dict,
                  extra_config: dict) -> dict:
        """`{run_id, status, status_reason, reply, usage}` of the step: a run of that agent
        type with `text` as its message."""
        depth = await readers.ancestors(self.state.run_id, MAX_DEPTH)
        if depth >= MAX_DEPTH:
            raise StepRefused(f"run {self.state.run_id} is {depth} steps deep: a workflow or "
                              "agent tool that calls itself is stopped there")
        binding: AgentBinding = await sync_to_async(step_binding)(
            agent_type_id, variables, self._timeout(), extra_config, self.state.binding)
        parent = self.state.event
        event = AgentEventEnvelope(
            event_type=STEP_EVENT, source="workflow", project_id=parent.project_id,
            agent_id=parent.agent_id, actor=parent.actor, input={"text": text},
            parent_run_id=self.state.run_id)
        # Announced: its row is written at once, so the tree shows the step under way.
        outcome = await self.run_to_end(event, binding, agent_name=name, announced=True)
        replies = [message["data"]["message"] for message in outcome.get("messages") or []
                   if message["type"] == "message.completed"
                   and isinstance(message["data"].get("message"), dict)]
        reply = replies[-1].get("content") if replies else ""
        return {"run_id": outcome.get("run_id"), "status": outcome.get("status"),
                "status_reason": outcome.get("status_reason") or "",
                "reply": reply if isinstance(reply, str) else "",
                "usage": outcome.get("usage") or {},
                "completed": outcome.get("status") == RunStatus.COMPLETED}
