import uuid

from django.conf import settings
from django.db import models

from accounts.models import Project

DEFAULT_RUNNER_ID = "builtin:echo"
# The runner of a type created with a primary model and no runner of its own.
LLM_AGENT_RUNNER_ID = "builtin:llm-agent"


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
