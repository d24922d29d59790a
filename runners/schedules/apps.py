from django.apps import AppConfig


class SchedulesConfig(AppConfig):
    """Runs on a schedule: a cron expression in a time zone starts a run of an agent (or a
    runner) at each tick, once across every process."""

    name = "runners.schedules"
    label = "schedules"
    default_auto_field = "django.db.models.BigAutoField"
