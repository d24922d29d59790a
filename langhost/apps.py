from django.apps import AppConfig
from django.contrib.admin.apps import AdminConfig
from django.db.backends.signals import connection_created

from langhost.base.sqlite import load_sqlite_vec


class LangHostConfig(AppConfig):
    """The project itself: its system checks."""

    name = "langhost"
    label = "langhost"

    def ready(self):
        from langhost import checks  # noqa: F401  (registers them)

        connection_created.connect(load_sqlite_vec, dispatch_uid="langhost-sqlite-vec")


class LangHostAdminConfig(AdminConfig):
    """Django's admin, on LangHost's site (`langhost.admin_site`)."""

    default_site = "langhost.admin_site.LangHostAdminSite"
