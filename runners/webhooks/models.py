"""A project's webhook (a URL for all its runs, and the secret every delivery of its runs is
signed with: write-only, stored encrypted) and each delivery of a run's outcome to a URL."""

from django.db import models

from accounts.models import Project


class ProjectWebhook(models.Model):
    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="webhook")
    url = models.URLField(blank=True, max_length=2000,
                          help_text="Where every run of the project reports how it ended.")
    secret = models.TextField(help_text="The signing secret, encrypted (write-only).")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self):
        return f"webhook of {self.project}"


class WebhookDelivery(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"

    run_id = models.CharField(max_length=64, db_index=True)
    project_id = models.CharField(max_length=64, blank=True)
    url = models.URLField(max_length=2000)
    body = models.JSONField(help_text="The run's outcome, as POSTed.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    next_attempt_at = models.DateTimeField(db_index=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["run_id", "url"],
                                               name="one_delivery_per_run_and_url")]

    def __str__(self):
        return f"{self.run_id} → {self.url}"
