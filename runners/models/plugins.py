"""What plugins provide: runner descriptors, plugin installations and their storage."""

import uuid

from django.db import models


class RunnerDescriptor(models.Model):
    """A runner LangHost can invoke: discovered from a plugin, or built in.

    Rows are never deleted when a runner vanishes (runs refer to them): `available` turns off.
    """

    class Source(models.TextChoices):
        PLUGIN = "plugin"
        BUILTIN = "builtin"
        # A plugin's command, run as a runner of its own (`runners.plugins.command_registry`);
        # never stored in this table.
        COMMAND = "command"

    id = models.CharField(primary_key=True, max_length=255)
    source = models.CharField(max_length=16, choices=Source.choices)
    label = models.JSONField(default=dict, blank=True)
    description = models.JSONField(default=dict, blank=True)
    plugin_author = models.CharField(max_length=128, blank=True, default="")
    plugin_name = models.CharField(max_length=128, blank=True, default="")
    plugin_version = models.CharField(max_length=64, blank=True, default="")
    runner_name = models.CharField(max_length=128)
    config_schema = models.JSONField(default=list, blank=True)
    capabilities = models.JSONField(default=dict, blank=True)
    permissions = models.JSONField(default=dict, blank=True)
    usages = models.JSONField(default=list, blank=True)
    supported_event_patterns = models.JSONField(default=list, blank=True)
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
        return f"{self.plugin_author}/{self.plugin_name}" if self.plugin_author else ""

    @property
    def display_label(self) -> str:
        label = self.label or {}
        return label.get("en_US") or next(iter(label.values()), "") or self.runner_name


class PluginInstallation(models.Model):
    """A plugin folder LangHost hands to the runtime, and the settings it answers for it."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    author = models.CharField(max_length=128)
    name = models.CharField(max_length=128)
    version = models.CharField(max_length=64, blank=True, default="")
    enabled = models.BooleanField(default=True)
    priority = models.IntegerField(default=0)
    config = models.JSONField(default=dict, blank=True)
    # Stamped by the runtime on every call the plugin makes: maps a call back to its plugin.
    installation_uuid = models.CharField(max_length=64, unique=True)
    status = models.CharField(max_length=32, blank=True, default="")
    last_error = models.TextField(blank=True, default="")
    # Whether it ships an `EventListener`, as the runtime last listed it: only such plugins
    # are told of a run's events (`runners.execution.listeners`).
    listens_to_events = models.BooleanField(default=False, editable=False)
    # Its `Page` components (`[{id, label, path}]`, `runners.plugins.pages`), as last listed.
    pages = models.JSONField(default=list, blank=True, editable=False)
    # Its `KnowledgeEngine` (`runners.plugins.engines`), as last listed; None when it has none.
    knowledge_engine = models.JSONField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["author", "name"]
        constraints = [
            models.UniqueConstraint(fields=["author", "name"], name="unique_plugin_installation")
        ]

    def __str__(self):
        return self.plugin_id

    @property
    def plugin_id(self) -> str:
        return f"{self.author}/{self.name}"


class PluginStorage(models.Model):
    """Binary key/value storage a plugin keeps through the runtime."""

    owner_type = models.CharField(max_length=16)
    owner = models.CharField(max_length=255)
    key = models.CharField(max_length=512)
    value = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["owner_type", "owner", "key"]
        constraints = [
            models.UniqueConstraint(fields=["owner_type", "owner", "key"], name="unique_plugin_storage")
        ]

    def __str__(self):
        return f"{self.owner_type}:{self.owner}:{self.key}"


class RuntimeWorker(models.Model):
    """A live `manage.py runtime` worker and what its runtime lists, renewed every liveness
    tick: a runner or plugin is available while at least one live worker lists it."""

    channel = models.CharField(primary_key=True, max_length=255,
                               help_text="The worker's own Channels channel.")
    runner_ids = models.JSONField(default=list, blank=True)
    plugin_ids = models.JSONField(default=list, blank=True)
    seen_at = models.DateTimeField()

    class Meta:
        ordering = ["channel"]

    def __str__(self):
        return self.channel
