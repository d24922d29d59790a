"""What runs cost and how they went: each model call, and the rollups the dashboard reads
(an agent's totals, runs by hour, model calls by day)."""


from django.db import models

from ledger.models.runs import RunStatus


class ModelCall(models.Model):
    """One call to a model, by a plugin or a built-in runner: what it cost and how it went.

    Every fallback attempt is a call of its own. The run's `usage` is the sum of its calls.
    """

    class Status(models.TextChoices):
        OK = "ok"
        ERROR = "error"
        CANCELLED = "cancelled"
        TIMEOUT = "timeout"

    run_id = models.CharField(max_length=64, blank=True, default="", db_index=True)
    agent_id = models.CharField(max_length=64, blank=True, default="", db_index=True)
    project_id = models.CharField(max_length=64, blank=True, default="")
    caller = models.CharField(max_length=255, blank=True, default="",
                              help_text="The plugin (author/name) or built-in runner that called.")
    model_id = models.CharField(max_length=64)
    model_name = models.CharField(max_length=200)
    provider_name = models.CharField(max_length=100, blank=True, default="")
    upstream_model = models.CharField(max_length=200, blank=True, default="")
    operation = models.CharField(max_length=16, default="invoke")
    attempt = models.PositiveSmallIntegerField(default=1)
    status = models.CharField(max_length=16, choices=Status.choices)
    error = models.TextField(blank=True, default="")
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    cached_tokens = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=8, default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    first_token_ms = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        db_table = "model_call"
        ordering = ["-id"]

    def __str__(self):
        return f"{self.model_name} {self.status} ({self.run_id or 'no run'})"


class AgentTotals(models.Model):
    """An agent's totals, kept as its runs complete and its model calls are recorded (in the
    same transactions): its metrics read this row, however long its history.
    `manage.py rebuild_rollups` recomputes them from the ledger."""

    agent_id = models.CharField(max_length=64, unique=True)
    completed_runs = models.PositiveBigIntegerField(default=0)
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    cost = models.DecimalField(max_digits=20, decimal_places=8, default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "agent_totals"
        verbose_name_plural = "agent totals"

    def __str__(self):
        return f"{self.agent_id}: {self.completed_runs} runs"


class RunHour(models.Model):
    """Runs that ended, by the hour they were created in (UTC), their runner and how they
    ended; `last_run_id` names the latest of them to end (after a rebuild, to start). The
    dashboard's counts read these rows, however long the ledger (`ledger.services.rollups`)."""

    hour = models.DateTimeField()
    runner_id = models.CharField(max_length=255)
    status = models.CharField(max_length=16, choices=RunStatus.choices)
    runs = models.PositiveBigIntegerField(default=0)
    last_run_id = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        db_table = "run_hour"
        constraints = [models.UniqueConstraint(fields=["hour", "runner_id", "status"],
                                               name="run_hour_once")]

    def __str__(self):
        return f"{self.hour:%Y-%m-%d %H}h {self.runner_id} {self.status}: {self.runs}"


class ModelCallDay(models.Model):
    """Model calls by the day they were made (in the site's time zone): the dashboard's token
    and cost figures read these rows (`ledger.services.rollups`)."""

    day = models.DateField(unique=True)
    calls = models.PositiveBigIntegerField(default=0)
    failures = models.PositiveBigIntegerField(default=0)
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    cost = models.DecimalField(max_digits=20, decimal_places=8, default=0)

    class Meta:
        db_table = "model_call_day"

    def __str__(self):
        return f"{self.day}: {self.calls} calls"
