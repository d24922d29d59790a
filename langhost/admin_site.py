"""The admin site, branded LangHost, with its own pages (playground, runtime) in the sidebar."""

from django.contrib import admin
from django.urls import reverse

from runners import safety

# LangHost's own admin pages (`langhost/urls.py`), listed like a model of an app of their own.
PAGES = [("Playground", "admin-playground"), ("Runtime", "admin-runtime-status")]


class LangHostAdminSite(admin.AdminSite):
    site_header = "LangHost administration"
    site_title = "LangHost"
    index_title = "Dashboard"

    def each_context(self, request):
        # A callable: worked out only by the pages that show the banner (base_site.html).
        return {**super().each_context(request), "unconfined_warnings": safety.warnings}

    def get_app_list(self, request, app_label=None):
        apps = super().get_app_list(request, app_label)
        if app_label is not None or not request.user.is_staff:
            return apps
        pages = [{"name": name, "object_name": name.lower(), "admin_url": reverse(url_name),
                  "add_url": None, "view_only": True, "perms": {"view": True}}
                 for name, url_name in PAGES]
        return [{"name": "LangHost", "app_label": "langhost",
                 "app_url": reverse("admin-playground"), "has_module_perms": True,
                 "models": pages}, *apps]
