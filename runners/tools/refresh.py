"""Listing an MCP server's tools on demand (the admin's and the API's "refresh"), keeping
them, or the error, on the server."""

from asgiref.sync import async_to_sync
from django.utils import timezone

from runners.models import McpServer
from runners.tools.errors import ToolError


async def refresh_tools(server: McpServer) -> dict:
    """List the server's tools now and keep them (or the error) on it.

    Returns `{"ok": True, "tools": [...]}` or `{"ok": False, "error": "..."}`.
    """
    from runners.tools import mcp  # the SDK loads on first use, not at start (admin, API)

    try:
        tools = await mcp.list_tools(server, refresh=True)
    except ToolError as exc:
        server.last_error = str(exc)
        await server.asave(update_fields=["last_error"])
        return {"ok": False, "error": server.last_error}
    server.tools, server.tools_refreshed_at, server.last_error = tools, timezone.now(), ""
    await server.asave(update_fields=["tools", "tools_refreshed_at", "last_error"])
    return {"ok": True, "tools": tools}


def refresh_tools_sync(server: McpServer) -> dict:
    """`refresh_tools` from sync code (a view, the admin)."""
    return async_to_sync(refresh_tools)(server)
