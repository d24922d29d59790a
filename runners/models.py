import uuid

from django.conf import settings
from django.db import models

from accounts.models import Project

DEFAULT_RUNNER_ID = "builtin:echo"


class AgentType(models.Model):
    """A kind of agent in the catalogue: persona, models, and the runner that executes it."""

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
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


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
