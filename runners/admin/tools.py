from django import forms
from django.contrib import admin, messages
from django.template.defaultfilters import linebreaksbr
from django.utils.html import format_html, format_html_join

from runners.admin.secret_fields import parse_secrets, secrets_field
from runners.models import McpServer
from runners.models.providers import ENV_NAME, HEADER_NAME
from runners.tools import mcp_servers
from runners.tools.refresh import refresh_tools_sync


class McpServerForm(forms.ModelForm):
    """Env and header values are write-only, like API keys."""

    url = forms.URLField(required=False, max_length=500, assume_scheme="https",
                         help_text=McpServer._meta.get_field("url").help_text)
    env = secrets_field("Environment", "NAME=value")
    clear_env = forms.BooleanField(label="Remove all environment variables", required=False)
    headers = secrets_field("Headers", "Name: value")
    clear_headers = forms.BooleanField(label="Remove all headers", required=False)

    class Meta:
        model = McpServer
        fields = ["name", "transport", "command", "args", "url", "enabled"]

    def clean_args(self):
        return self.cleaned_data["args"] or []  # left blank: no arguments

    def clean_env(self):
        return parse_secrets(self.cleaned_data["env"], "=", ENV_NAME, "variable")

    def clean_headers(self):
        return parse_secrets(self.cleaned_data["headers"], ":", HEADER_NAME, "header")

    def save(self, commit=True):
        server = super().save(commit=False)
        for name, write in (("env", mcp_servers.set_env), ("headers", mcp_servers.set_headers)):
            if self.cleaned_data.get(f"clear_{name}"):
                write(server, {})
            elif self.cleaned_data.get(name):
                write(server, self.cleaned_data[name])
        if commit:
            server.save()
        return server


@admin.register(McpServer)
class McpServerAdmin(admin.ModelAdmin):
    form = McpServerForm
    list_display = ["name", "transport", "target", "enabled", "tool_count", "tools_refreshed_at",
                    "reachable"]
    list_filter = ["transport", "enabled"]
    search_fields = ["name", "command", "url"]
    readonly_fields = ["env_names", "header_names", "tool_list", "tools_refreshed_at",
                       "last_error", "created_at", "updated_at"]
    actions = ["list_tools"]
    fieldsets = [
        (None, {"fields": ["name", "transport", "enabled"]}),
        ("stdio", {"fields": ["command", "args", "env_names", "env", "clear_env"]}),
        ("Streamable HTTP", {"fields": ["url", "header_names", "headers", "clear_headers"]}),
        ("Tools", {"fields": ["tool_list", "tools_refreshed_at", "last_error"]}),
        ("Dates", {"fields": ["created_at", "updated_at"]}),
    ]

    @admin.display(description="Command or URL")
    def target(self, obj):
        return obj.url if obj.transport == McpServer.Transport.STREAMABLE_HTTP else obj.command

    @admin.display(description="Tools")
    def tool_count(self, obj):
        return len(obj.tools)

    @admin.display(description="Reachable", boolean=True)
    def reachable(self, obj):
        """A tick once it listed its tools, a cross when it last failed (its error on its
        page), unknown until it was tried."""
        if obj.last_error:
            return False
        return True if obj.tools_refreshed_at else None

    @admin.display(description="Environment variables set")
    def env_names(self, obj):
        return ", ".join(mcp_servers.env_names(obj)) or "none"

    @admin.display(description="Headers set")
    def header_names(self, obj):
        return ", ".join(mcp_servers.header_names(obj)) or "none"

    @admin.display(description="Tools (when last listed)")
    def tool_list(self, obj):
        return _tools_html(obj.tools) or "none listed yet: use the List tools action"

    @admin.action(description="List tools (start or reach the server now)")
    def list_tools(self, request, queryset):
        for server in queryset:
            result = refresh_tools_sync(server)
            if result["ok"]:
                self.message_user(request, format_html(
                    "MCP server '{}' lists {} tool(s): {}", server.name, len(result["tools"]),
                    _tools_html(result["tools"]) or "none"), messages.SUCCESS)
            else:  # the error names the server; a server's stderr comes in lines
                self.message_user(request, linebreaksbr(result["error"]), messages.ERROR)


def _tools_html(tools: list[dict]):
    return format_html_join(
        "", "<div><code>{}</code> {}</div>",
        ((tool["name"], tool.get("description", "")) for tool in tools))
