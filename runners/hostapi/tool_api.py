"""LangBot's tool actions, answered in LangBot's shapes: `get_tool_detail` ->
`{"tool": {name, description, parameters}}`, `call_tool` -> `{"result": ...}`. An MCP tool's
result carries LangBot's list of content elements (text parts as text) in `content`, inside an
object: the installed SDK checks a traced call's result is one (`ToolCallCompletedPayload`).

A call names its run, is the run's plugin's (checked like every in-run API), and names a tool
granted to the run for the operation (`resources.tools` of its frozen authorization), else
`tool.not_granted`; `call_tool` needs the run active. Each call is recorded through the run's
handle as host events `tool.call.started` / `tool.call.completed`, in whichever process the
run executes. `event_reply` (LangBot's event tool) answers into the run's conversation: a
`message.completed` of the run, delivered to its caller. `activate_skill` activates a granted
skill as the built-in agent's tool does, kept in the conversation's state for its next runs
(`_activate_skill`). `call_platform_api` answers the
SDK's `reply_files` only (a reply with files exported from the box, as download links).
"""

import json
import time
import uuid

import pydantic
from langbot_plugin.api.entities.builtin.provider.message import ContentElement

from ledger.models import RunStatus
from ledger.services import state as runner_state
from runners.agent import agent_tools, reply_files, skill_tools, tool_calls
from runners.grants.tools import EVENT_REPLY
from runners.hostapi import run_api
from runners.runtime.host_actions import HostError
from runners.runtime.host_process import host_process
from runners.runtime.run_handle import RunHandle
from runners.tools.errors import ToolError

# What `call_platform_api`'s `send_message` may carry as its message, besides a text: the
# parts of one (as a runner's own reply carries them).
MESSAGE_PARTS = pydantic.TypeAdapter(list[ContentElement])
ACTIONS = frozenset({"get_tool_detail", "call_tool", "call_platform_api"})
OPERATIONS = {"get_tool_detail": "detail", "call_tool": "call"}


async def handle(action: str, data: dict, context: dict | None) -> dict:
    """Answer one tool action, or raise HostError."""
    if action == "call_platform_api":
        return await _platform_call(data, context)
    run, auth = await run_api.authorize(action, data, context)
    name = data.get("tool_name")
    tool = tool_calls.granted_tool(auth.get("resources"), name)
    operation = OPERATIONS[action]
    if tool is None or operation not in (tool.get("operations") or []):
        # HostError puts the code in the message text: all the runner sees.
        raise HostError("tool.not_granted",
                        f"tool {name!r} is not granted to run {run.run_id} for {operation}")
    if action == "get_tool_detail":
        return {"tool": {"name": tool["tool_name"], "description": tool.get("description") or "",
                         "parameters": tool.get("parameters") or {}}}
    if run.status != RunStatus.RUNNING:
        raise HostError("run.not_active", f"run {run.run_id} is {run.status}; call_tool needs "
                                          "an active run")
    arguments = data.get("parameters") if isinstance(data.get("parameters"), dict) else {}
    handle = host_process().handle(run.run_id)
    if tool.get("source") == "event":
        return {"result": await _event_reply(run.run_id, handle, arguments)}
    if tool.get("source") == "agent":
        return {"result": await _called(handle, tool, arguments, lambda: _ask_agent(
            handle, tool, arguments))}
    if tool.get("source") == "skill":
        return {"result": await _called(handle, tool, arguments, lambda: _activate_skill(
            run.run_id, auth, tool, arguments, handle))}
    deadline = run.deadline_at.timestamp() if run.deadline_at else None
    result = await _called(handle, tool, arguments, lambda: tool_calls.call(
        tool, arguments, tool_calls.timeout_for(deadline)))
    if tool.get("source") == "mcp":
        result = {"content": content_elements(result),
                  **({"structuredContent": result["structuredContent"]}
                     if "structuredContent" in result else {})}
    return {"result": result}


def content_elements(answer: dict) -> list[dict]:
    """An MCP tool's answer (`runners.tools.mcp`) as LangBot's host returns it to a plugin:
    content elements, its text as text, images as `image_base64`, any other part (or the
    structured content of an answer without text) as its JSON in a text element."""
    elements = [{"type": "text", "text": answer["text"]}] if answer.get("text") else []
    if not elements and "structuredContent" in answer:
        elements.append({"type": "text", "text": json.dumps(answer["structuredContent"])})
    for block in answer.get("content") or []:
        if block.get("type") == "image":
            elements.append({"type": "image_base64", "image_base64":
                             f"data:{block.get('mimeType')};base64,{block.get('data')}"})
        else:
            elements.append({"type": "text", "text": json.dumps(block)})
    return elements


async def _record(handle: RunHandle | None, type_: str, data: dict) -> None:
    if handle is not None:
        await handle.record(type_, data)


async def _called(handle: RunHandle | None, tool: dict, arguments: dict, call) -> dict:
    """`call()`'s result, recorded as the run's tool call; its ToolError a `tool.failed`."""
    call_id, name = f"host-{uuid.uuid4().hex[:12]}", tool["tool_name"]
    await _record(handle, "tool.call.started",
                  {"tool_call_id": call_id, "tool_name": name, "parameters": arguments})
    started = time.monotonic()
    result = error = None
    try:
        result = await call()
        return result
    except ToolError as exc:
        error = str(exc)
        raise HostError("tool.failed", f"{name}: {error}") from None
    finally:
        await _record(handle, "tool.call.completed", {
            "tool_call_id": call_id, "tool_name": name, "result": tool_calls.recorded(result),
            "error": error, "duration_ms": round((time.monotonic() - started) * 1000)})


async def _ask_agent(handle: RunHandle | None, tool: dict, arguments: dict) -> dict:
    """An agent called as a tool: its reply, from a run of its own under the caller's."""
    if handle is None:
        raise ToolError("the run is not executing here")
    try:
        recorded, _ = await agent_tools.ask(handle, {
            "agent_type_id": tool["source_id"], "name": tool.get("agent_name") or ""},
            arguments)
    except agent_tools.AgentToolError as exc:
        raise ToolError(str(exc)) from None
    return recorded


async def _activate_skill(run_id: str, auth: dict, tool: dict, arguments: dict,
                          handle: RunHandle | None) -> dict:
    """`activate_skill` for a plugin runner, as the built-in agent's: the skill's instructions
    (`text`), its files copied into the box when the run has it, and the skill kept active in
    the conversation's state for its next runs (when the run has the conversation scope)."""
    scope = (auth.get("state_context") or {}).get(skill_tools.STATE_SCOPE)
    kept = await runner_state.state_get(scope["scope_key"], skill_tools.STATE_KEY) if scope \
        else None
    skills = await skill_tools.Skills.of((auth.get("resources") or {}).get("skills"), kept,
                                         tool_calls.box_workspace(tool))
    if skills is None:
        raise ToolError("no skill is granted to this run")
    try:
        recorded, shown = await skills.activate(arguments)
    except skill_tools.FAILURES as exc:
        raise ToolError(str(exc)) from None
    active = list(skills.active)
    if skills.changed and scope is not None:
        write = skills.state()
        active = await runner_state.state_add_to_list(runner_state.StateWrite(
            scope=write["scope"], scope_key=scope["scope_key"], state_key=write["key"],
            value=write["value"], identity=scope["identity"]))
        await _record(handle, "state.updated", {**write, "value": active})
    return {**recorded, "text": shown, "active": active}


async def _platform_call(data: dict, context: dict | None) -> dict:
    """`call_platform_api`: LangHost has no IM platform; it answers the one call a runner
    makes of it anywhere, the SDK's `reply_files` (`send_message` through `event_reply`, with
    `file_ids`): a reply of the run with those files as download links."""
    run, auth = await run_api.authorize("call_platform_api", data, context)
    if data.get("action") != "send_message" or data.get("context_tool") != EVENT_REPLY:
        raise HostError("host.unsupported", "call_platform_api: LangHost has no IM platforms; "
                                            "it answers send_message through event_reply only")
    tool = tool_calls.granted_tool(auth.get("resources"), EVENT_REPLY)
    if tool is None or "call" not in (tool.get("operations") or []):
        raise HostError("tool.not_granted", f"event_reply is not granted to run {run.run_id}")
    file_ids = data.get("file_ids") or []
    if not isinstance(file_ids, list) or not all(isinstance(item, str) for item in file_ids):
        raise HostError("tool.bad_arguments", "file_ids must be a list of file ids")
    params = data.get("params") if isinstance(data.get("params"), dict) else {}
    content = params.get("message") or []
    if not isinstance(content, str):
        try:
            content = [part.model_dump(exclude_none=True)
                       for part in MESSAGE_PARTS.validate_python(content)]
        except pydantic.ValidationError as exc:
            problem = exc.errors(include_url=False)[0]
            where = ".".join(["params.message", *map(str, problem["loc"])])
            raise HostError("tool.bad_arguments", f"{where}: {problem['msg']}") from None
    message = await reply_files.saved({"role": "assistant", "content": content},
                                      run.conversation_id, run.run_id, file_ids)
    handle = host_process().handle(run.run_id)
    if run.status != RunStatus.RUNNING or handle is None or not await handle.reply(message):
        raise HostError("run.not_active", f"run {run.run_id} is no longer streaming")
    return {"result": {"replied": True, "file_ids": file_ids}}


async def _event_reply(run_id: str, handle: RunHandle | None, arguments: dict) -> dict:
    text = arguments.get("text")
    if not isinstance(text, str) or not text:
        raise HostError("tool.bad_arguments", "event_reply needs `text`, a non-empty string")
    if handle is None or not await handle.reply({"role": "assistant", "content": text}):
        raise HostError("run.not_active", f"run {run_id} is no longer streaming")
    return {"replied": True}
