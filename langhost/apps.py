from django.apps import AppConfig


class LangHostConfig(AppConfig):
    """The project itself: its system checks."""

    name = "langhost"
    label = "langhost"

    def ready(self):
        from langhost import checks  # noqa: F401  (registers them)
