"""Runs: their status, rows, events and the grants they were started with."""

import copy

from django.db import models


class RunStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMEOUT = "timeout"


TERMINAL_STATUSES = frozenset(
    {RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.TIMEOUT}
)
# Runs not ended yet.
ACTIVE_STATUSES = (RunStatus.QUEUED, RunStatus.RUNNING)


class RunQuerySet(models.QuerySet):
    def active(self):
        return self.filter(status__in=ACTIVE_STATUSES)


class AgentRun(models.Model):
    run_id = models.CharField(max_length=64, unique=True)
    event_id = models.CharField(max_length=255, db_index=True)
    agent_id = models.CharField(max_length=64, blank=True, default="")
    binding_id = models.CharField(max_length=255, blank=True, default="")
    runner_id = models.CharField(max_length=255)
    # The run it is a step of (a workflow's), when it is one.
    parent_run_id = models.CharField(max_length=64, blank=True, default="", db_index=True)
    conversation_id = models.CharField(max_length=255, blank=True, default="")
    thread_id = models.CharField(max_length=255, blank=True, default="")
    project_id = models.CharField(max_length=64, blank=True, default="")
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.QUEUED)
    status_reason = models.TextField(blank=True, default="")
    # Who asked for the run (`user`/<user id>, `operator`/`cli`): with the project's owner
    # and superusers, the only ones who may see it.
    actor_type = models.CharField(max_length=64, blank=True, default="")
    actor_id = models.CharField(max_length=255, blank=True, default="")
    # The process that executes the run renews this lease; the reaper fails runs whose
    # lease ran out (their owner died).
    execution_owner_id = models.CharField(max_length=128, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    deadline_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    usage_json = models.JSONField(null=True, blank=True)
    cost_json = models.JSONField(null=True, blank=True)
    # What in-run API calls are checked against (`authorization()`): the run's own part here,
    # the part its binding decides (grants, APIs, policies) kept once in `RunGrants`.
    authorization_json = models.JSONField(default=dict, blank=True)
    grants_digest = models.CharField(max_length=64, blank=True, default="")
    metadata_json = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = RunQuerySet.as_manager()

    class Meta:
        db_table = "agent_run"
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["runner_id", "status"], name="agent_run_runner_status"),
            models.Index(fields=["conversation_id", "status"], name="agent_run_conv_status"),
            # What the door, the reaper and the work loop ask on every run or tick: the active
            # runs, few rows of a table that grows, found by status first. (Not partial
            # indexes: SQLite cannot match their condition against bound parameters.)
            models.Index(fields=["agent_id", "status"], name="agent_run_agent_status"),
            models.Index(fields=["status", "lease_expires_at"], name="agent_run_status_lease"),
            models.Index(fields=["status", "execution_owner_id"], name="agent_run_status_owner"),
            # A user's runs and a project's, newest first, a keyset page at a time.
            models.Index(fields=["actor_id", "id"], name="agent_run_actor_newest"),
            models.Index(fields=["project_id", "id"], name="agent_run_project_newest"),
        ]

    def __str__(self):
        return f"{self.run_id} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    def authorization(self) -> dict:
        """The run's authorization snapshot, whole: its grants and its own part."""
        shared = shared_grants(self.grants_digest) if self.grants_digest else {}
        return {**shared, **(self.authorization_json or {})}

    @property
    def duration_seconds(self) -> float | None:
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None


class EventSource(models.TextChoices):
    RUNNER = "runner"
    HOST = "host"


class AgentRunEvent(models.Model):
    # The unique (run, sequence) index serves lookups by run: no index of its own.
    run = models.ForeignKey(
        AgentRun, to_field="run_id", db_column="run_id", on_delete=models.CASCADE,
        related_name="events", db_index=False,
    )
    sequence = models.IntegerField()
    type = models.CharField(max_length=64)
    data_json = models.JSONField(default=dict, blank=True)
    usage_json = models.JSONField(null=True, blank=True)
    source = models.CharField(max_length=8, choices=EventSource.choices, default=EventSource.RUNNER)
    metadata_json = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "agent_run_event"
        ordering = ["run_id", "sequence"]
        constraints = [
            models.UniqueConstraint(fields=["run", "sequence"], name="agent_run_event_run_seq")
        ]

    def __str__(self):
        return f"{self.run_id}#{self.sequence} {self.type}"


class RunGrants(models.Model):
    """The part of runs' authorization snapshots that their binding decides (runner, APIs,
    policies, prompt, granted models, tools, knowledge bases, skills): the same for most runs,
    kept once per distinct value, named by the SHA-256 of its JSON."""

    digest = models.CharField(max_length=64, unique=True)
    snapshot = models.JSONField()

    class Meta:
        db_table = "run_grants"
        verbose_name_plural = "run grants"

    def __str__(self):
        return self.digest[:12]


# digest → snapshot, as read: a row never changes (its digest is its content's).
_grants_read: dict[str, dict] = {}
GRANTS_KEPT = 512


def shared_grants(digest: str) -> dict:
    """The grants of that digest ({} when there is no such row)."""
    if digest not in _grants_read:
        snapshot = RunGrants.objects.filter(digest=digest).values_list(
            "snapshot", flat=True).first()
        if snapshot is None:
            return {}
        if len(_grants_read) >= GRANTS_KEPT:
            _grants_read.clear()
        _grants_read[digest] = snapshot
    return copy.deepcopy(_grants_read[digest])
