"""MCP servers as stored: their write-only env and headers, and their tools cache.

Env values and header values are secrets (tokens, API keys): kept encrypted like providers'
API keys, answered only by name. Nothing here loads the `mcp` SDK.
"""

import json

from runners.models import McpServer
from runners.providers.secrets import (
    UnreadableKey,
    decrypt,
    encrypt,
    rotate_stored_sync,
)
from runners.tools.errors import ToolError

# One label per kind of secret keeps their keys apart.
ENV_LABEL = b"langhost.mcp-server.env"
HEADERS_LABEL = b"langhost.mcp-server.headers"


def _seal(values: dict[str, str], label: bytes) -> str:
    return encrypt(json.dumps(values), label) if values else ""


def _open(token: str, label: bytes) -> dict[str, str]:
    return json.loads(decrypt(token, label)) if token else {}


def set_env(server: McpServer, env: dict[str, str]) -> None:
    """Replace the server's environment variables (the caller saves it); `{}` removes them."""
    server.env_encrypted = _seal(env, ENV_LABEL)


def set_headers(server: McpServer, headers: dict[str, str]) -> None:
    """Replace the server's HTTP headers (the caller saves it); `{}` removes them."""
    server.headers_encrypted = _seal(headers, HEADERS_LABEL)


def env(server: McpServer) -> dict[str, str]:
    """The server's environment variables, values included: for its process only."""
    try:
        return _open(server.env_encrypted, ENV_LABEL)
    except UnreadableKey:
        raise ToolError(f"The env stored for MCP server '{server.name}' cannot be decrypted "
                        "(SECRET_KEY changed?); set it again.") from None


def headers(server: McpServer) -> dict[str, str]:
    """The server's HTTP headers, values included: for its requests only."""
    try:
        return _open(server.headers_encrypted, HEADERS_LABEL)
    except UnreadableKey:
        raise ToolError(f"The headers stored for MCP server '{server.name}' cannot be "
                        "decrypted (SECRET_KEY changed?); set them again.") from None


def rotate_secrets_sync() -> tuple[int, list[str]]:
    """`rotate_stored_sync` for servers' env and headers."""
    return rotate_stored_sync(
        McpServer.objects.exclude(env_encrypted="", headers_encrypted=""),
        {"env_encrypted": ENV_LABEL, "headers_encrypted": HEADERS_LABEL})


def _names(read, server: McpServer) -> list[str]:
    try:
        return sorted(read(server))
    except ToolError:  # unreadable: nothing to show, the next connection says why
        return []


def env_names(server: McpServer) -> list[str]:
    return _names(env, server)


def header_names(server: McpServer) -> list[str]:
    return _names(headers, server)


MCP_TOOL_PREFIX = "mcp:"


def listed_tools(servers) -> list[dict]:
    """The tools of `servers` as each last listed them (`McpServer.tools`), in the shape of a
    plugin tool's descriptor: id `mcp:<server>/<tool>`, `source` mcp, `server` its name;
    available while its server is enabled and was reached when last tried."""
    return [{"id": f"{MCP_TOOL_PREFIX}{server.name}/{tool['name']}", "name": tool["name"],
             "source": "mcp", "server": server.name, "plugin": None, "plugin_author": "",
             "plugin_name": "", "label": {}, "description": tool.get("description") or "",
             "parameters": tool.get("inputSchema") or {},
             "available": server.enabled and not server.last_error,
             "last_seen_at": server.tools_refreshed_at}
            for server in servers for tool in server.tools or []
            if isinstance(tool, dict) and tool.get("name")]
