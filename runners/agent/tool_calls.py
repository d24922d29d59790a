"""Calling a granted tool: an MCP server's through `runners.tools.mcp`, a plugin's through
the process's gateway, the box's in the run's conversation's workspace. Shared by LangBot's
`call_tool` action and the built-in LLM agent."""

import json
import time

from runners.box import services as box_services
from runners.box import tools as box_tools
from runners.models import McpServer, ToolDescriptor
from runners.observability import metrics, tracing
from runners.runtime.errors import RuntimeLinkError
from runners.runtime.host_process import host_process
from runners.tools.errors import ToolError

TOOL_CALL_TIMEOUT = 60.0
# What the ledger keeps of a tool's result: a tool may answer megabytes.
RECORDED_RESULT_BYTES = 16 * 1024


def granted_tool(resources: dict | None, name) -> dict | None:
    """The grant of tool `name` among a run's `resources`, if it has one."""
    for tool in (resources or {}).get("tools") or []:
        if isinstance(tool, dict) and tool.get("tool_name") == name:
            return tool
    return None


def timeout_for(deadline: float | None) -> float:
    """A call's timeout: the tool's own limit, or less when the run's deadline comes first."""
    if deadline is None:
        return TOOL_CALL_TIMEOUT
    return max(min(TOOL_CALL_TIMEOUT, deadline - time.time()), 1.0)


async def call(tool: dict, arguments: dict, timeout: float = TOOL_CALL_TIMEOUT) -> dict:
    """Call the granted `tool` (a grant of `tool_grants`) with `arguments`; its result as a
    dict. Raises `ToolError`, with the reason in words fit for a model."""
    try:
        with tracing.tool_call(tool):
            result = await _call(tool, arguments, timeout)
    except BaseException:
        metrics.TOOL_CALLS.labels(tool.get("tool_name") or "", "error").inc()
        raise
    metrics.TOOL_CALLS.labels(tool.get("tool_name") or "", "ok").inc()
    return result


async def _call(tool: dict, arguments: dict, timeout: float) -> dict:
    name, source_id = tool.get("tool_name"), tool.get("source_id")
    if tool.get("source") == "mcp":
        from runners.tools import mcp  # the MCP SDK loads on first use, not at start

        server = await McpServer.objects.filter(name=source_id, enabled=True).afirst()
        if server is None:
            raise ToolError(f"MCP server {source_id!r} is gone or disabled")
        return await mcp.call_tool(server, name, arguments, timeout)
    if tool.get("source") == "plugin":
        row = await ToolDescriptor.objects.filter(pk=source_id, available=True).afirst()
        if row is None:
            raise ToolError(f"plugin tool {source_id!r} is no longer available")
        gateway = host_process().gateway_binding
        if gateway is None:
            raise ToolError("this process reaches no plugin runtime")
        try:
            result = await gateway.call_tool(row.plugin_author, row.plugin_name,
                                                   row.name, arguments, timeout)
        except RuntimeLinkError as exc:
            raise ToolError(f"{row.pk}: {exc}") from None
        return result if isinstance(result, dict) else {"result": result}
    if tool.get("source") == "box":
        workspace = box_workspace(tool)
        try:
            recorded, shown = await box_tools.call(workspace, name, arguments)
        except box_tools.FAILURES as exc:
            raise ToolError(str(exc)) from None
        return {**recorded, "text": shown}
    raise ToolError(f"tool {name!r} has no source LangHost can call")


def box_workspace(tool: dict) -> box_services.Workspace | None:
    """The conversation's box a grant works in (its `source_id`, `<project>:<conversation>`);
    None when the run has no box."""
    project_id, _, conversation_id = str(tool.get("source_id") or "").partition(":")
    if not conversation_id:
        return None
    return box_services.Workspace(project_id=project_id, conversation_id=conversation_id,
                                  network=bool(tool.get("network")))


def recorded(result: dict | None) -> dict | None:
    """`result` as the ledger keeps it: cut to RECORDED_RESULT_BYTES of JSON."""
    if result is None:
        return None
    text = json.dumps(result, ensure_ascii=False, default=str)
    if len(text.encode()) <= RECORDED_RESULT_BYTES:
        return result
    cut = text.encode()[:RECORDED_RESULT_BYTES].decode(errors="ignore")
    return {"truncated": True, "json": cut}
