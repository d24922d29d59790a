"""The tools a run may call: its `resources.tools`, frozen into its authorization.

A runner is granted tools only when its manifest asks for tool operations (detail, call) and
its capabilities include `tool_calling` (the built-in LLM agent declares both). The tools are
those of the MCP servers the binding's config names (`mcp_servers`, enabled servers only,
their tools as last listed; a server never listed is listed now), then the plugin tools its
`tools` list names (a tool name or `plugin:<author>/<plugin>/<tool>` id, available ones only).
A tool name is granted once, the first source wins: runners call tools by name.

A plugin runner allowed to call tools also gets LangBot's event tool `event_reply` (source
`event`), which answers into the run's conversation; the built-in agent answers with its own
messages instead. With the box granted, it also gets the box's tools (source `box`), on its
conversation's workspace.

With skills granted, a plugin runner gets `activate_skill` (source `skill`), as the built-in
agent has it: the skill's instructions (and its files in the box), kept active in the
conversation (`host.activated_skills`) for its next runs.

The agent types its config names as tools (`agent_tools`, source `agent`) are called like
any tool; each call is a run of that agent type with the caller's run as its parent.

A binding's resource policy may name the only tools its runs get (`allowed_tool_names`);
`event_reply`, the run's own way to answer, is not a tool it can withhold.

Each grant is an SDK `ToolResource` with `source` (`mcp` or `plugin`) and `source_id` (the MCP
server's name, the plugin tool's id) added: what a call is routed by. The runner's context
validates through the SDK, which keeps only the SDK's fields.
"""

import logging

from django.db.models import Q

from runners.box import tools as box_tools
from runners.models import McpServer, RunnerDescriptor, ToolDescriptor
from runners.protocol import AgentBinding
from runners.tools.errors import ToolError

logger = logging.getLogger(__name__)

TOOL_OPERATIONS = ("detail", "call")
EVENT_REPLY = "event_reply"
ACTIVATE_SKILL = "activate_skill"


def _names(value) -> list[str]:
    values = value if isinstance(value, list) else [value]
    return list(dict.fromkeys(item for item in values if isinstance(item, str) and item))


async def _mcp_tools(names: list[str]) -> list[tuple[McpServer, dict]]:
    servers = {server.name: server
               async for server in McpServer.objects.filter(name__in=names, enabled=True)}
    found = []
    for name in names:
        server = servers.get(name)
        if server is None:
            continue
        tools = server.tools
        if not tools:
            from runners.tools import mcp  # the MCP SDK loads on first use, not at start

            try:
                tools = await mcp.list_tools(server)
            except ToolError as exc:  # the run goes on without this server's tools
                logger.warning("MCP server %s: no tools for the run: %s", name, exc)
                tools = []
        found += [(server, tool) for tool in tools if isinstance(tool, dict) and tool.get("name")]
    return found


async def tool_grants(binding: AgentBinding, descriptor: RunnerDescriptor,
                      box_workspace: str | None = None, skills: list[dict] = ()) -> list[dict]:
    """`box_workspace` (`<project id>:<conversation id>`, when the run has the box): a plugin
    runner's tools include the box's (`exec`, `read_file`, `write_file`, `list_files`).
    `skills` (the run's skill grants): a plugin runner's include `activate_skill`."""
    wanted = [op for op in TOOL_OPERATIONS if op in ((descriptor.permissions or {}).get("tools")
                                                    or [])]
    grants: dict[str, dict] = {}
    plugin = descriptor.source == RunnerDescriptor.Source.PLUGIN
    if "call" in wanted and plugin and box_workspace:
        for tool in box_tools.DEFINITIONS:
            grants[tool["name"]] = {
                "tool_name": tool["name"], "tool_type": "box", "operations": wanted,
                "description": tool["description"], "parameters": tool["parameters"],
                "source": "box", "source_id": box_workspace,
                "network": bool((binding.runner_config or {}).get("box_network"))}
    if "call" in wanted and plugin and skills:
        listed = "; ".join(f"{skill['skill_name']}: {skill['description']}" for skill in skills)
        grants[ACTIVATE_SKILL] = {
            "tool_name": ACTIVATE_SKILL, "tool_type": "skill", "operations": wanted,
            "description": "Activate a skill to get its instructions (and, in the box, its "
                           f"files); it stays active in the conversation. Skills: {listed}",
            "parameters": {"type": "object", "required": ["name"], "properties": {"name": {
                "type": "string", "enum": [skill["skill_name"] for skill in skills]}}},
            "source": "skill", "source_id": box_workspace or "",
            "network": bool((binding.runner_config or {}).get("box_network"))}
    if "call" in wanted and plugin:
        grants[EVENT_REPLY] = {
            "tool_name": EVENT_REPLY, "tool_type": "platform",
            "description": "Reply to the current event in its conversation.",
            "operations": wanted, "source": "event", "source_id": EVENT_REPLY,
            "parameters": {"type": "object", "required": ["text"],
                           "properties": {"text": {"type": "string"}}}}
    if not wanted or not (descriptor.capabilities or {}).get("tool_calling"):
        return allowed(grants, binding.resource_policy.allowed_tool_names)
    config = binding.runner_config
    servers, plugin_tools = _names(config.get("mcp_servers")), _names(config.get("tools"))
    for server, tool in await _mcp_tools(servers) if servers else []:
        grants.setdefault(tool["name"], {
            "tool_name": tool["name"], "tool_type": "mcp",
            "description": tool.get("description") or "", "operations": wanted,
            "parameters": tool.get("inputSchema") or {"type": "object", "properties": {}},
            "source": "mcp", "source_id": server.name})
    if plugin_tools:
        rows = ToolDescriptor.objects.filter(Q(pk__in=plugin_tools) | Q(name__in=plugin_tools),
                                             available=True)
        by_key = {}
        async for row in rows:
            by_key.setdefault(row.pk, row)
            by_key.setdefault(row.name, row)
        for key in plugin_tools:
            row = by_key.get(key)
            if row is not None:
                grants.setdefault(row.name, {
                    "tool_name": row.name, "tool_type": "plugin",
                    "description": row.description, "operations": wanted,
                    "parameters": row.parameters or {"type": "object", "properties": {}},
                    "source": "plugin", "source_id": row.pk})
    # The built-in agent calls its agent tools itself (`runners.agent.agent_tools`).
    for tool in config.get("agent_tools") or [] if plugin else []:
        grants.setdefault(tool["tool_name"], {
            "tool_name": tool["tool_name"], "tool_type": "agent", "operations": wanted,
            "description": f"Ask the agent {tool['name']} and get its answer. "
                           f"{tool['description']}".strip(),
            "parameters": {"type": "object", "required": ["request"],
                           "properties": {"request": {"type": "string"}}},
            "source": "agent", "source_id": tool["agent_type_id"], "agent_name": tool["name"]})
    return allowed(grants, binding.resource_policy.allowed_tool_names)


def allowed(grants: dict[str, dict], names: list[str] | None) -> list[dict]:
    """The grants the policy's `allowed_tool_names` lets through (all when it names none)."""
    if names is None:
        return list(grants.values())
    return [grant for name, grant in grants.items() if name in names or name == EVENT_REPLY]
