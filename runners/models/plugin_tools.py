"""Tools and commands plugins provide: their `Tool` and `Command` components, as the runtime
lists them."""

from django.db import models


class DiscoveredComponent(models.Model):
    """A plugin's component, kept from discovery beside the runner descriptors.

    Rows are never deleted when a component vanishes (calls and runs may refer to them):
    `available` turns off.
    """

    id = models.CharField(primary_key=True, max_length=255)
    name = models.CharField(max_length=128)
    plugin_author = models.CharField(max_length=128)
    plugin_name = models.CharField(max_length=128)
    label = models.JSONField(default=dict, blank=True)
    raw_manifest = models.JSONField(default=dict, blank=True)
    available = models.BooleanField(default=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True
        ordering = ["id"]

    def __str__(self):
        return self.id

    @property
    def plugin_identity(self) -> str:
        return f"{self.plugin_author}/{self.plugin_name}"


class ToolDescriptor(DiscoveredComponent):
    """A plugin's tool (id `plugin:<author>/<plugin>/<tool>`)."""

    description = models.TextField(blank=True, default="")
    parameters = models.JSONField(default=dict, blank=True, help_text="JSON schema")

    class Meta(DiscoveredComponent.Meta):
        pass


class CommandDescriptor(DiscoveredComponent):
    """A plugin's command (`!name ...` in a message; id `command:<author>/<plugin>/<name>`)."""

    description = models.JSONField(default=dict, blank=True)

    class Meta(DiscoveredComponent.Meta):
        pass
