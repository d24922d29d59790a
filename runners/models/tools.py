"""Tools agents reach outside LangHost: MCP servers."""

import uuid

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models


class McpServer(models.Model):
    """An MCP server an agent type names in its `mcp_servers` list: a child process spoken to
    over stdio, or a Streamable HTTP endpoint.

    Its environment variables and HTTP headers are write-only like API keys: stored encrypted
    (`runners.tools.mcp_servers`), only their names are ever shown.
    """

    class Transport(models.TextChoices):
        STDIO = "stdio", "stdio (a child process)"
        STREAMABLE_HTTP = "streamable-http", "Streamable HTTP"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(
        max_length=100, unique=True,
        validators=[RegexValidator(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
                                   "Letters, digits, '_', '.' and '-', starting with a letter "
                                   "or digit.")],
        help_text="What agent types name in their mcp_servers list.")
    transport = models.CharField(max_length=16, choices=Transport.choices,
                                 default=Transport.STDIO)
    command = models.CharField(max_length=500, blank=True, default="",
                               help_text="stdio: the executable, e.g. npx or /usr/bin/python3.")
    args = models.JSONField(default=list, blank=True,
                            help_text='stdio: its arguments, e.g. ["-y", "some-mcp-server"].')
    env_encrypted = models.TextField(blank=True, default="", editable=False)
    url = models.URLField(max_length=500, blank=True, default="",
                          help_text="streamable-http: the endpoint, e.g. http://host:8000/mcp.")
    headers_encrypted = models.TextField(blank=True, default="", editable=False)
    enabled = models.BooleanField(default=True)
    last_error = models.TextField(blank=True, default="", editable=False)
    tools = models.JSONField(default=list, blank=True, editable=False,
                             help_text="Its tools when last listed: name, description, "
                                       "inputSchema.")
    tools_refreshed_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "MCP server"

    def __str__(self):
        return self.name

    def transport_errors(self) -> dict[str, str]:
        """What its transport needs and it lacks, by field."""
        if self.transport == self.Transport.STDIO and not self.command.strip():
            return {"command": "A stdio server needs a command."}
        if self.transport == self.Transport.STREAMABLE_HTTP and not self.url:
            return {"url": "A streamable-http server needs a url."}
        return {}

    def clean(self):
        errors = self.transport_errors()
        if not isinstance(self.args, list) or not all(isinstance(a, str) for a in self.args):
            errors["args"] = 'A list of strings, e.g. ["server.py", "--verbose"].'
        if errors:
            raise ValidationError(errors)
