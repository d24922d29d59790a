"""Tools and commands plugins provide: their `Tool` and `Command` components, as the runtime
lists them."""

from django.db import models


class ToolDescriptor(models.Model):
    """A plugin's tool, kept from discovery beside the runner descriptors.

    Rows are never deleted when a tool vanishes (calls may refer to them): `available` turns off.
    """

    id = models.CharField(primary_key=True, max_length=255)  # plugin:<author>/<plugin>/<tool>
    name = models.CharField(max_length=128)
    plugin_author = models.CharField(max_length=128)
    plugin_name = models.CharField(max_length=128)
    label = models.JSONField(default=dict, blank=True)
    description = models.TextField(blank=True, default="")
    parameters = models.JSONField(default=dict, blank=True, help_text="JSON schema")
    raw_manifest = models.JSONField(default=dict, blank=True)
    available = models.BooleanField(default=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]

    def __str__(self):
        return self.id

    @property
    def plugin_identity(self) -> str:
        return f"{self.plugin_author}/{self.plugin_name}"


class CommandDescriptor(models.Model):
    """A plugin's command (`!name ...` in a message), kept from discovery as its tools are.

    Rows are never deleted when a command vanishes (runs name them): `available` turns off.
    """

    id = models.CharField(primary_key=True, max_length=255)  # command:<author>/<plugin>/<name>
    name = models.CharField(max_length=128)
    plugin_author = models.CharField(max_length=128)
    plugin_name = models.CharField(max_length=128)
    label = models.JSONField(default=dict, blank=True)
    description = models.JSONField(default=dict, blank=True)
    raw_manifest = models.JSONField(default=dict, blank=True)
    available = models.BooleanField(default=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]

    def __str__(self):
        return self.id

    @property
    def plugin_identity(self) -> str:
        return f"{self.plugin_author}/{self.plugin_name}"
