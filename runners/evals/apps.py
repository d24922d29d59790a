from django.apps import AppConfig


class EvalsConfig(AppConfig):
    """Evaluations: an agent run against a set of cases with expected replies, tool calls and
    rubrics, before its prompt or model changes; the reports are kept."""

    name = "runners.evals"
    label = "evals"
    default_auto_field = "django.db.models.BigAutoField"
