"""Runners that run inside LangHost's process, with the same result contract as plugin runners.

Each is called with the run's context and the run's handle (`runners.runtime.run_handle`),
its only way to act on the run beyond its results.
"""

import asyncio
from collections.abc import AsyncIterator
from types import ModuleType

from runners.agent import workflow as workflow_runner
from runners.protocol import runner_result
from runners.runtime.run_handle import RunHandle


async def echo(context: dict, handle: RunHandle) -> AsyncIterator[dict]:
    """Answers `echo: <input text>`: the smallest complete run."""
    text = (context.get("input") or {}).get("text") or ""
    message = {"role": "assistant", "content": f"echo: {text}"}
    yield runner_result(context["run_id"], 1, "message.completed",
                        {"message": message, "file_ids": []})
    yield runner_result(context["run_id"], 2, "run.completed", {"finish_reason": "stop"})


def _import_llm_agent() -> ModuleType:
    from runners.agent import llm_agent as agent

    return agent


_llm_agent: ModuleType | None = None


async def llm_agent(context: dict, handle: RunHandle) -> AsyncIterator[dict]:
    """The agent type's persona answering through its models (see `llm_agent`)."""
    global _llm_agent
    if _llm_agent is None:
        # Imported on the first LLM run, on a worker thread: the provider SDKs take seconds to
        # load, and the loop's other requests and runs go on meanwhile.
        _llm_agent = await asyncio.to_thread(_import_llm_agent)
    async for item in _llm_agent.run(context, handle):
        yield item


async def workflow(context: dict, handle: RunHandle) -> AsyncIterator[dict]:
    """A workflow type's steps, one after another (see `workflow`)."""
    async for item in workflow_runner.run(context, handle):
        yield item


BUILTIN_RUNNERS = {
    "builtin:echo": {
        "run": echo,
        "label": {"en_US": "Echo"},
        "description": {"en_US": "Replies with the input text. Built in; needs no plugin."},
        "capabilities": {"streaming": False},
        "permissions": {},
    },
    "builtin:llm-agent": {
        "run": llm_agent,
        "label": {"en_US": "LLM agent"},
        "description": {"en_US": "The agent type's persona answering through its models, "
                                 "with its MCP and plugin tools, its knowledge bases, "
                                 "fallback and transfer_to_agent in agent trees."},
        # It asks the user before running a tool its type marks `requires_approval`.
        "capabilities": {"streaming": True, "tool_calling": True, "interactions": True},
        # Its context lists the models and tools it may call, like a plugin runner's.
        "permissions": {"models": ["invoke", "stream", "count_tokens"],
                        "tools": ["detail", "call"], "knowledge_bases": ["list", "retrieve"]},
    },
    "builtin:workflow": {
        "run": workflow,
        "label": {"en_US": "Workflow"},
        "description": {"en_US": "A workflow type's sub-agents as its steps, one after "
                                 "another, each a run of its own; a step's reply is the next "
                                 "one's message."},
        "capabilities": {"streaming": False},
        "permissions": {},
    },
}
