"""`builtin:workflow`: a workflow agent type's runner (ADK's workflow agents). Its steps are
the type's sub-agents, in order; each step is a run of its own with this run as its parent.

- `sequential`: one after another; a step's message is the one before's reply (the first's,
  the workflow's message); the last reply is the workflow's.
- `parallel`: all at once on the workflow's message, none seeing another's reply; the
  workflow's reply gathers theirs in order. A failed step fails the workflow unless the type
  says to go on without it.
- `loop`: the steps in turn, again and again, each reading the reply before, until one exits
  the loop (the built-in agent is offered `exit_loop`; a plugin runner ends its run with the
  finish reason `exit_loop`) or `max_iterations` rounds ran.

A step with an `output_key` keeps its reply in the conversation's state under that key, where
the later steps' personas read it as `{key}`. The workflow's usage is the sum of its steps'.
A step that does not complete (in a sequence or a loop) fails the workflow, naming it.
"""

import asyncio
from collections.abc import AsyncIterator

from runners.protocol import runner_result
from runners.runtime.run_handle import RunHandle

USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")
# A loop's step is offered the tool (the built-in agent's config), and one that called it
# ends its run with this finish reason.
EXIT_LOOP = "exit_loop"
EXIT_LOOP_TOOL = {"name": EXIT_LOOP, "description": "Stop the loop you are a step of: call it "
                  "once the work is done, and say why in your answer.",
                  "parameters": {"type": "object", "properties": {}}}


class _Workflow:
    def __init__(self, context: dict, handle: RunHandle):
        self.run_id, self.sequence, self.handle = context["run_id"], 0, handle
        self.config = context.get("config") or {}
        self.steps = self.config.get("steps") or []
        kept = (context.get("state") or {}).get("conversation") or {}
        self.variables = {key: value for key, value in kept.items() if isinstance(value, str)}
        self.usage = dict.fromkeys(USAGE_KEYS, 0)

    def result(self, type_: str, data: dict, with_usage: bool = False) -> dict:
        self.sequence += 1
        return runner_result(self.run_id, self.sequence, type_, data,
                             dict(self.usage) if with_usage else None)

    async def step(self, number: int, text: str, extra: dict | None = None) -> dict:
        step = self.steps[number - 1]
        outcome = await self.handle.run_child(step["agent_type_id"], step["name"], text,
                                              dict(self.variables), extra)
        for key in USAGE_KEYS:
            self.usage[key] += int(outcome["usage"].get(key) or 0)
        return {**outcome, "number": number, "name": step["name"]}

    def failed(self, outcome: dict) -> dict:
        return self.result("run.failed", {
            "code": "workflow.step_failed",
            "error": f"step {outcome['number']} ({outcome['name']}, run {outcome['run_id']}) "
                     f"ended {outcome['status']}: {outcome['status_reason']}"}, with_usage=True)

    def kept(self, outcome: dict) -> list[dict]:
        """The step's reply kept under its `output_key`, if it has one."""
        key = self.steps[outcome["number"] - 1].get("output_key")
        if not key:
            return []
        self.variables[key] = outcome["reply"]
        return [self.result("state.updated", {"scope": "conversation", "key": key,
                                              "value": outcome["reply"]})]

    def answered(self, text: str) -> list[dict]:
        return [self.result("message.completed", {
            "message": {"role": "assistant", "content": text}, "file_ids": []}),
            self.result("run.completed", {"finish_reason": "stop"}, with_usage=True)]

    async def in_turn(self, text: str, rounds: int, extra: dict | None):
        """The steps in order, `rounds` times at most; a step that exits the loop ends it."""
        exited = False
        for _ in range(rounds):
            for number in range(1, len(self.steps) + 1):
                outcome = await self.step(number, text, extra)
                if not outcome["completed"]:
                    yield self.failed(outcome)
                    return
                text = outcome["reply"]
                for item in self.kept(outcome):
                    yield item
                exited = outcome["status_reason"] == EXIT_LOOP
                if exited:
                    break
            if exited:
                break
        for item in self.answered(text):
            yield item

    async def _step_or_failure(self, number: int, text: str) -> dict:
        """A parallel step's outcome; one that could not even start is a failed one."""
        try:
            return await self.step(number, text)
        except Exception as exc:  # e.g. its runner is gone: the others go on
            return {"number": number, "name": self.steps[number - 1]["name"], "run_id": None,
                    "status": "failed", "status_reason": f"{type(exc).__name__}: {exc}",
                    "reply": "", "usage": {}, "completed": False}

    async def at_once(self, text: str):
        outcomes = await asyncio.gather(*(self._step_or_failure(number, text)
                                          for number in range(1, len(self.steps) + 1)))
        failed = [outcome for outcome in outcomes if not outcome["completed"]]
        if failed and not (self.config.get("continue_on_step_failure") and len(failed) <
                           len(outcomes)):
            yield self.failed(failed[0])
            return
        for outcome in outcomes:
            for item in self.kept(outcome) if outcome["completed"] else []:
                yield item
        for item in self.answered("\n\n".join(f"{outcome['name']}: {outcome['reply']}"
                                              for outcome in outcomes if outcome["completed"])):
            yield item


async def run(context: dict, handle: RunHandle) -> AsyncIterator[dict]:
    workflow = _Workflow(context, handle)
    text = (context.get("input") or {}).get("text") or ""
    kind = workflow.config.get("workflow")
    if not workflow.steps:
        yield workflow.result("run.failed", {
            "code": "workflow.no_steps", "error": "the workflow has no steps: give its type "
                                                  "sub-agents"})
        return
    if kind == "parallel":
        steps = workflow.at_once(text)
    elif kind == "loop":
        steps = workflow.in_turn(text, max(int(workflow.config.get("max_iterations") or 1), 1),
                                 {EXIT_LOOP: True})
    else:
        steps = workflow.in_turn(text, 1, None)
    async for item in steps:
        yield item

