from django.apps import AppConfig


class KnowledgeConfig(AppConfig):
    """Knowledge bases: a project's documents, chunked, embedded and searchable."""

    name = "runners.knowledge"
    label = "knowledge"
    default_auto_field = "django.db.models.BigAutoField"
