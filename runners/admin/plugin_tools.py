from django.contrib import admin

from ledger.admin import pretty
from runners.models import CommandDescriptor, McpServer, ToolDescriptor
from runners.tools.mcp_servers import listed_tools


def in_english(texts: dict, fallback: str = "") -> str:
    """A manifest's i18n text: its English, else its first language, else `fallback`."""
    texts = texts or {}
    return texts.get("en_US") or next(iter(texts.values()), "") or fallback


class DiscoveredComponentAdmin(admin.ModelAdmin):
    """A plugin component the runtime listed: discovery writes these, nobody edits them."""

    list_display = ["id", "name", "plugin_identity", "available", "last_seen_at"]
    list_filter = ["available", "plugin_author", "plugin_name"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description="plugin")
    def plugin_identity(self, obj):
        return obj.plugin_identity

    @admin.display(description="label")
    def label_text(self, obj):
        return in_english(obj.label, obj.name)

    @admin.display(description="manifest")
    def manifest(self, obj):
        return pretty(obj.raw_manifest)


@admin.register(ToolDescriptor)
class ToolDescriptorAdmin(DiscoveredComponentAdmin):
    """Plugin tools the runtime listed, then the MCP servers' tools as each last listed them."""

    change_list_template = "admin/runners/tooldescriptor/change_list.html"

    def changelist_view(self, request, extra_context=None):
        return super().changelist_view(request, {
            **(extra_context or {}), "mcp_tools": listed_tools(McpServer.objects.order_by("name"))})

    search_fields = ["id", "name", "plugin_name", "plugin_author", "description"]
    fields = ["id", "name", "plugin_author", "plugin_name", "available", "last_seen_at",
              "label_text", "description", "parameter_schema", "manifest"]
    readonly_fields = fields

    @admin.display(description="parameters (JSON schema)")
    def parameter_schema(self, obj):
        return pretty(obj.parameters)


@admin.register(CommandDescriptor)
class CommandDescriptorAdmin(DiscoveredComponentAdmin):
    """Plugin commands the runtime listed: what a message starting with an agent type's
    command prefix and the name runs."""

    search_fields = ["id", "name", "plugin_name", "plugin_author"]
    fields = ["id", "name", "plugin_author", "plugin_name", "available", "last_seen_at",
              "label_text", "description_text", "manifest"]
    readonly_fields = fields

    @admin.display(description="description")
    def description_text(self, obj):
        return in_english(obj.description)
