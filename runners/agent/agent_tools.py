"""Agents as tools (ADK's `AgentTool`, OpenAI Agents' `as_tool`): an agent type names other
agent types (`agent_tools`); its agent may call each like a function with a request and gets
its reply. Each call is a run of that agent type with the caller's run as its parent
(`RunHandle.run_child`), its tokens and cost its own."""

from runners.catalogue.bindings import StepRefused
from runners.protocol import RunRefused
from runners.runtime.run_handle import RunHandle


class AgentToolError(Exception):
    """The agent called as a tool did not complete; the message says how it ended."""


def definition(tool: dict) -> dict:
    """The tool the model is offered for one agent tool (`{agent_type_id, name, tool_name,
    description}`, from the type's config)."""
    return {"name": tool["tool_name"],
            "description": f"Ask the agent {tool['name']} and get its answer. "
                           f"{tool['description']}".strip(),
            "parameters": {"type": "object", "required": ["request"], "properties": {
                "request": {"type": "string", "description": "What to ask it."}}}}


async def ask(handle: RunHandle, tool: dict, args: dict) -> tuple[dict, str]:
    """`(recorded result, what the caller reads)`: the agent's reply to the request."""
    request = args.get("request")
    if not isinstance(request, str) or not request:
        raise AgentToolError("the call needs `request`, what to ask the agent")
    try:
        outcome = await handle.run_child(tool["agent_type_id"], tool["name"], request, {})
    except (StepRefused, RunRefused) as exc:
        raise AgentToolError(f"the agent {tool['name']} cannot answer: {exc}") from None
    if not outcome["completed"]:
        raise AgentToolError(f"the agent {tool['name']} (run {outcome['run_id']}) ended "
                             f"{outcome['status']}: {outcome['status_reason']}")
    return {"agent": tool["name"], "run_id": outcome["run_id"],
            "reply": outcome["reply"]}, outcome["reply"]
