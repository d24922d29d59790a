import uuid

from django.conf import settings
from django.db import models

from accounts.models import Project
from runners.models import AgentInstance


class MissedTicks(models.TextChoices):
    SKIP = "skip", "Skip ticks missed while LangHost was down"
    RUN_ONCE = "run_once", "Run once for all ticks missed while LangHost was down"


class Schedule(models.Model):
    """A run at each tick of a cron expression, in a time zone: a message to an agent (in one
    conversation, or none) or, for superusers, a runner's run. Its runs are started by the
    process that owns work, as its creator: the door decides as for any of their runs."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="schedules")
    name = models.CharField(max_length=200)
    cron = models.CharField(max_length=200, help_text='Five fields, e.g. "0 9 * * 1-5" (a sixth, seconds, last).')
    timezone = models.CharField(max_length=64, default="UTC",
                                help_text="An IANA time zone, e.g. Europe/Paris.")
    agent = models.ForeignKey(AgentInstance, on_delete=models.CASCADE, null=True, blank=True,
                              related_name="schedules")
    conversation_id = models.CharField(
        max_length=128, blank=True, default="",
        help_text="A conversation of the creator's with the agent; blank: each run apart.")
    runner_id = models.CharField(max_length=255, blank=True, default="",
                                 help_text="A runner to run instead of an agent (superusers).")
    input = models.JSONField(default=dict, blank=True,
                             help_text='What each run is sent: {"text": ...}.')
    enabled = models.BooleanField(default=True)
    missed_ticks = models.CharField(max_length=16, choices=MissedTicks.choices,
                                    default=MissedTicks.SKIP)
    next_run_at = models.DateTimeField(null=True, blank=True,
                                       help_text="The next tick (none while disabled).")
    last_run_at = models.DateTimeField(null=True, blank=True)
    last_run_id = models.CharField(max_length=64, blank=True, default="")
    last_error = models.TextField(blank=True, default="",
                                  help_text="Why the last tick started no run, if it did not.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        indexes = [models.Index(fields=["enabled", "next_run_at"], name="schedule_due")]

    def __str__(self):
        return f"{self.name} ({self.cron} {self.timezone})"

    @property
    def event_prefix(self) -> str:
        """The start of the event id of each of its runs (the tick follows)."""
        return f"schedule:{self.pk}:"
