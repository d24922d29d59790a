"""`builtin:workflow`: a workflow agent type's runner (ADK's `SequentialAgent`): its steps
(the type's sub-agents, in order) run one after another, each a run of its own with this run
as its parent. A step's message is the one before's reply (the first's, the workflow's
message); a step with an `output_key` keeps its reply in the conversation's state under that
key, where the later steps' personas read it as `{key}`. The last step's reply is the
workflow's; its usage is the sum of its steps'. A step that does not complete fails the
workflow, naming it."""

from collections.abc import AsyncIterator

from runners.protocol import runner_result
from runners.runtime.run_handle import RunHandle

USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")


async def run(context: dict, handle: RunHandle) -> AsyncIterator[dict]:
    run_id, sequence = context["run_id"], 0
    config = context.get("config") or {}
    text = (context.get("input") or {}).get("text") or ""
    kept = (context.get("state") or {}).get("conversation") or {}
    variables = {key: value for key, value in kept.items() if isinstance(value, str)}
    usage = dict.fromkeys(USAGE_KEYS, 0)

    def result(type_: str, data: dict, with_usage: bool = False) -> dict:
        nonlocal sequence
        sequence += 1
        return runner_result(run_id, sequence, type_, data, dict(usage) if with_usage else None)

    for number, step in enumerate(config.get("steps") or [], start=1):
        outcome = await handle.run_child(step["agent_type_id"], step["name"], text, variables)
        for key in USAGE_KEYS:
            usage[key] += int(outcome["usage"].get(key) or 0)
        if not outcome["completed"]:
            yield result("run.failed", {
                "code": "workflow.step_failed",
                "error": f"step {number} ({step['name']}, run {outcome['run_id']}) ended "
                         f"{outcome['status']}: {outcome['status_reason']}"}, with_usage=True)
            return
        text = outcome["reply"]
        if step.get("output_key"):
            variables[step["output_key"]] = text
            yield result("state.updated", {"scope": "conversation", "key": step["output_key"],
                                           "value": text})
    yield result("message.completed", {"message": {"role": "assistant", "content": text},
                                       "file_ids": []})
    yield result("run.completed", {"finish_reason": "stop"}, with_usage=True)
