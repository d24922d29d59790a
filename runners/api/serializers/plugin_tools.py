from rest_framework import serializers

from runners.models import ToolDescriptor


class ToolSerializer(serializers.ModelSerializer):
    plugin = serializers.CharField(source="plugin_identity", read_only=True, allow_null=True,
                                   help_text="`author/name` of the plugin that provides it")
    source = serializers.SerializerMethodField(help_text="`plugin` or `mcp`")
    server = serializers.SerializerMethodField(help_text="the MCP server's name (mcp tools)")

    class Meta:
        model = ToolDescriptor
        fields = ["id", "name", "source", "server", "plugin", "plugin_author", "plugin_name",
                  "label", "description", "parameters", "available", "last_seen_at"]

    def get_source(self, tool) -> str:
        return "plugin"

    def get_server(self, tool) -> str | None:
        return None

    @classmethod
    def mcp_rows(cls, tools: list[dict]) -> list[dict]:
        """MCP tools (`mcp_servers.listed_tools`) in this serializer's field order and
        formats."""
        when = serializers.DateTimeField()
        return [{name: (when.to_representation(tool[name]) if name == "last_seen_at"
                        and tool[name] else tool[name]) for name in cls.Meta.fields}
                for tool in tools]
