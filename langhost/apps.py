from django.apps import AppConfig
from django.contrib.admin.apps import AdminConfig


class LangHostConfig(AppConfig):
    """The project itself: its system checks."""

    name = "langhost"
    label = "langhost"

    def ready(self):
        from langhost import checks  # noqa: F401  (registers them)


class LangHostAdminConfig(AdminConfig):
    """Django's admin, on LangHost's site (`langhost.admin_site`)."""

    default_site = "langhost.admin_site.LangHostAdminSite"
