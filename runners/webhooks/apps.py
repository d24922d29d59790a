from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    """Run outcomes POSTed, signed, to the URLs a run, its agent type or its project names."""

    name = "runners.webhooks"
    label = "webhooks"
    default_auto_field = "django.db.models.BigAutoField"
