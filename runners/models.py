import uuid

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from accounts.models import Project

DEFAULT_RUNNER_ID = "builtin:echo"


class AgentKind(models.TextChoices):
    LLM = "llm", "LLM agent"
    WORKFLOW = "workflow", "Workflow agent"


class AgentType(models.Model):
    """A kind of agent in the catalogue: persona, models, and the runner that executes it.

    A type may have ordered sub-agent types (`SubAgent`): the tree an instance of it runs.
    Within one tree an agent is known by its `name` (unique per tree).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=100, unique=True)
    description = models.TextField(blank=True, default="", max_length=10_000)
    expertise = models.JSONField(default=list, blank=True)
    personality_prompt = models.TextField(blank=True, default="", max_length=50_000)
    primary_model = models.CharField(max_length=200, blank=True, default="")
    fallback_models = models.JSONField(default=list, blank=True)
    model_params = models.JSONField(default=dict, blank=True)
    mcp_servers = models.JSONField(default=list, blank=True)
    is_active = models.BooleanField(default=True)
    runner_id = models.CharField(max_length=255, default=DEFAULT_RUNNER_ID)
    kind = models.CharField(max_length=16, choices=AgentKind.choices, default=AgentKind.LLM)
    disallow_transfer_to_parent = models.BooleanField(default=False)
    disallow_transfer_to_peers = models.BooleanField(default=False)
    save_input_blobs_as_artifacts = models.BooleanField(
        default=True,
        help_text="Save files sent inline in a message as conversation artifacts and hand the "
                  "runner a reference instead of the bytes.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    def clean(self):
        """A rename must keep names unique in every tree this type belongs to."""
        super().clean()
        from .trees import validate_trees

        try:
            validate_trees(self)
        except ValidationError as exc:
            raise ValidationError({"name": exc.messages}) from exc


class SubAgent(models.Model):
    """An ordered edge of agent trees: `child` is a sub-agent of `parent` at `position`."""

    parent = models.ForeignKey(AgentType, on_delete=models.CASCADE, related_name="sub_agent_links")
    child = models.ForeignKey(AgentType, on_delete=models.CASCADE, related_name="parent_links")
    position = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["parent_id", "position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["parent", "child"], name="unique_sub_agent"),
        ]

    def __str__(self):
        return f"{self.parent} → {self.child}"

    def clean(self):
        """No cycle, no type under two parents, no duplicate name in any tree this edge joins.

        The admin inline checks the whole submitted list instead (`skip_tree_check`).
        """
        super().clean()
        if getattr(self, "skip_tree_check", False) or not (self.parent_id and self.child_id):
            return
        from .trees import validate_trees

        children = list(
            SubAgent.objects.filter(parent_id=self.parent_id).exclude(pk=self.pk)
            .order_by("position", "id").values_list("child_id", flat=True)
        )
        validate_trees(self.parent, children=[*children, self.child_id])


class InvalidTransition(Exception):
    """An agent instance cannot move from its current status to the requested one."""

    def __init__(self, instance, action):
        self.current_status = instance.status
        super().__init__(f"Cannot {action} an agent whose status is '{instance.status}'.")


class AgentInstance(models.Model):
    """An agent of some type, spawned into a project."""

    class Status(models.TextChoices):
        IDLE = "idle"
        WORKING = "working"
        PAUSED = "paused"
        TERMINATED = "terminated"

    # action -> (statuses it may start from, status it leads to)
    TRANSITIONS = {
        "pause": ({Status.IDLE, Status.WORKING}, Status.PAUSED),
        "resume": ({Status.PAUSED}, Status.IDLE),
        "terminate": ({Status.IDLE, Status.WORKING, Status.PAUSED}, Status.TERMINATED),
    }

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="agents")
    agent_type = models.ForeignKey(AgentType, on_delete=models.PROTECT, related_name="instances")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.IDLE)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at"]

    def __str__(self):
        return f"{self.name} ({self.agent_type})"

    def transition(self, action: str) -> None:
        """Apply `pause`, `resume` or `terminate`, or raise InvalidTransition."""
        allowed_from, target = self.TRANSITIONS[action]
        if self.status not in allowed_from:
            raise InvalidTransition(self, action)
        self.status = target
        self.save(update_fields=["status", "updated_at"])


class RunnerDescriptor(models.Model):
    """A runner LangHost can invoke: discovered from a plugin, or built in.

    Rows are never deleted when a runner vanishes (runs refer to them): `available` turns off.
    """

    class Source(models.TextChoices):
        PLUGIN = "plugin"
        BUILTIN = "builtin"

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

    @property
    def folder_name(self) -> str:
        return f"{self.author}__{self.name}"


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


def default_state_policy():
    return {"enable_state": True, "state_scopes": ["conversation", "actor"]}


def default_delivery_policy():
    return {"enable_streaming": True, "enable_reply": True}


def default_resource_policy():
    return {"allow_plugin_storage": True, "allow_workspace_storage": False}


class Binding(models.Model):
    """Which runner answers for a scope. `binding_id` is part of every state key: keep it stable."""

    class ScopeType(models.TextChoices):
        GLOBAL = "global"
        PROJECT = "project"
        AGENT = "agent"
        CONVERSATION = "conversation"

    binding_id = models.CharField(max_length=255, unique=True)
    scope_type = models.CharField(max_length=16, choices=ScopeType.choices, default=ScopeType.GLOBAL)
    scope_id = models.CharField(max_length=255, blank=True, default="")
    runner_id = models.CharField(max_length=255)
    runner_config = models.JSONField(default=dict, blank=True)
    state_policy = models.JSONField(default=default_state_policy, blank=True)
    delivery_policy = models.JSONField(default=default_delivery_policy, blank=True)
    resource_policy = models.JSONField(default=default_resource_policy, blank=True)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["scope_type", "scope_id", "binding_id"]

    def __str__(self):
        return self.binding_id
