import django_filters
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import viewsets
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from runners.api.serializers.plugin_tools import ToolSerializer
from runners.models import McpServer, ToolDescriptor
from runners.tools.mcp_servers import MCP_TOOL_PREFIX, listed_tools


class ToolFilter(django_filters.FilterSet):
    plugin = django_filters.CharFilter(method="filter_plugin",
                                       help_text="`author/name` of the plugin")

    class Meta:
        model = ToolDescriptor
        fields = ["available", "plugin_author", "plugin_name"]

    def filter_plugin(self, queryset, name, value):
        author, _, plugin = value.partition("/")
        return queryset.filter(plugin_author=author, plugin_name=plugin)


PLUGIN_FILTERS = ("plugin", "plugin_author", "plugin_name")
SOURCE = OpenApiParameter("source", str, enum=["plugin", "mcp"],
                          description="only plugins' tools, or only MCP servers' tools")
SERVER = OpenApiParameter("server", str, description="only this MCP server's tools")


class ToolViewSet(viewsets.ReadOnlyModelViewSet):
    """Every tool an agent type may be granted: plugins' `Tool` components from the runtime's
    discovery (unavailable ones are kept), then MCP servers' tools as each server last listed
    them (`source`: `plugin` or `mcp`; `server`: the MCP server's name)."""

    serializer_class = ToolSerializer
    queryset = ToolDescriptor.objects.order_by("id")
    lookup_value_regex = r".+"
    filterset_class = ToolFilter

    @extend_schema(parameters=[SOURCE, SERVER])
    def list(self, request, *args, **kwargs):
        params = request.query_params
        source, server = params.get("source"), params.get("server")
        tools = []
        if source in (None, "", "plugin") and not server:
            tools += ToolSerializer(self.filter_queryset(self.get_queryset()), many=True).data
        if source in (None, "", "mcp") and not any(params.get(name) for name in PLUGIN_FILTERS):
            tools += mcp_tools(server, params.get("available"))
        return self.get_paginated_response(self.paginate_queryset(tools))

    def retrieve(self, request, *args, **kwargs):
        tool_id = kwargs[self.lookup_field]
        if not tool_id.startswith(MCP_TOOL_PREFIX):
            return super().retrieve(request, *args, **kwargs)
        server, _, _ = tool_id[len(MCP_TOOL_PREFIX):].partition("/")
        found = [tool for tool in mcp_tools(server, None) if tool["id"] == tool_id]
        if not found:
            raise NotFound(f"No tool {tool_id!r}: the server lists no such tool (yet).")
        return Response(found[0])


def mcp_tools(server: str | None, available: str | None) -> list[dict]:
    servers = McpServer.objects.order_by("name")
    if server:
        servers = servers.filter(name=server)
    tools = listed_tools(servers)
    if available in ("true", "True", "1", "false", "False", "0"):
        wanted = available in ("true", "True", "1")
        tools = [tool for tool in tools if tool["available"] == wanted]
    return ToolSerializer.mcp_rows(tools)
