"""A plugin's pages in the admin (`runners.plugins.pages`): listed on its installation, each
shown in a sandboxed frame to whoever may change the installation, its calls answered by the
plugin's `handle_api`."""

import json

from asgiref.sync import async_to_sync
from csp.decorators import csp_replace
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html_join
from django.views.decorators.clickjacking import xframe_options_sameorigin
from django.views.decorators.http import require_POST

from runners.models import PluginInstallation
from runners.plugins import pages
from runners.plugins.gateway import get_gateway
from runners.runtime.errors import RuntimeLinkError

# What the frame's files may do: their own scripts (the SDK's page script from this host),
# inline as plugin pages have them, in an origin of their own, framed by the admin only.
FRAME_POLICY = {"default-src": ["'self'"], "script-src": ["'self'", "'unsafe-inline'"],
                "style-src": ["'self'", "'unsafe-inline'"], "img-src": ["'self'", "data:"],
                "connect-src": ["'self'"], "frame-ancestors": ["'self'"],
                "sandbox": ["allow-scripts", "allow-forms", "allow-popups"]}
CHANGE_PERMISSION = "runners.change_plugininstallation"


def _label(page: dict) -> str:
    label = page.get("label") or {}
    return label.get("en_US") or next(iter(label.values()), "") or page["id"]


class PluginPagesAdmin(admin.ModelAdmin):
    """The page views of `PluginInstallationAdmin`."""

    def page_urls(self):
        return [
            path("<path:object_id>/pages/<str:page_id>/",
                 self.admin_site.admin_view(self.page_view),
                 name="runners_plugininstallation_page"),
            path("<path:object_id>/pages/<str:page_id>/api",
                 self.admin_site.admin_view(require_POST(self.page_api_view)),
                 name="runners_plugininstallation_page_api"),
            # The frame's files: no session (a sandboxed frame sends no cookie), a signed path.
            path("page-files/<str:token>/<path:relative>", self.page_file_view,
                 name="runners_plugininstallation_page_file"),
        ]

    @admin.display(description="pages")
    def page_links(self, obj):
        if not obj.pages:
            return "—"
        return format_html_join(", ", '<a href="{}">{}</a>', (
            (reverse("admin:runners_plugininstallation_page", args=[obj.pk, page["id"]]),
             _label(page)) for page in obj.pages))

    def _page(self, request, object_id: str, page_id: str) -> tuple[PluginInstallation, dict]:
        installation = get_object_or_404(PluginInstallation, pk=object_id)
        if not self.has_change_permission(request, installation):
            raise PermissionDenied
        page = pages.find(installation, page_id)
        if page is None or not installation.enabled:
            raise Http404("The plugin has no such page, or it is disabled.")
        return installation, page

    def page_view(self, request, object_id: str, page_id: str):
        installation, page = self._page(request, object_id, page_id)
        token = pages.files_token(installation, page_id, request.user.pk)
        html = page["path"].rsplit("/", 1)[-1]
        return TemplateResponse(request, "admin/runners/plugininstallation/page.html", {
            **self.admin_site.each_context(request), "opts": self.model._meta,
            "title": f"{installation.plugin_id}: {_label(page)}", "installation": installation,
            "frame_url": reverse("admin:runners_plugininstallation_page_file",
                                 args=[token, html]),
            "api_url": reverse("admin:runners_plugininstallation_page_api",
                               args=[installation.pk, page_id])})

    def page_api_view(self, request, object_id: str, page_id: str):
        """`{data, error}` of the plugin's `handle_api` for one call of its page."""
        installation, page = self._page(request, object_id, page_id)
        try:
            call = json.loads(request.body or b"{}")
        except ValueError:
            call = None
        if not isinstance(call, dict) or not isinstance(call.get("endpoint"), str):
            return JsonResponse({"data": None, "error": "endpoint: a string is required"},
                                status=400)
        method = str(call.get("method") or "POST").upper()
        try:
            answer = async_to_sync(get_gateway().page_api)(
                installation.plugin_id, page_id, call["endpoint"], method, call.get("body"))
        except (RuntimeLinkError, RuntimeError) as exc:
            return JsonResponse({"data": None, "error": f"the plugin did not answer: {exc}"},
                                status=502)
        if not isinstance(answer, dict):
            return JsonResponse({"data": None, "error": "the plugin answered no object"},
                                status=502)
        return JsonResponse({"data": answer.get("data"), "error": answer.get("error")})

    @staticmethod
    @xframe_options_sameorigin
    @csp_replace(FRAME_POLICY)
    def page_file_view(request, token: str, relative: str):
        granted = pages.read_files_token(token)
        if granted is None:
            raise PermissionDenied
        author, _, name = granted["plugin"].partition("/")
        installation = PluginInstallation.objects.filter(author=author, name=name,
                                                         enabled=True).first()
        page = pages.find(installation, granted["page"]) if installation else None
        user = get_user_model().objects.filter(pk=granted["user"], is_active=True,
                                               is_staff=True).first()
        if page is None or user is None or not user.has_perm(CHANGE_PERMISSION):
            raise PermissionDenied
        file = pages.file_path(page, relative)
        try:
            found = file and async_to_sync(get_gateway().plugin_file)(installation.plugin_id, file)
        except (RuntimeLinkError, RuntimeError) as exc:
            return HttpResponse(f"The plugin did not answer: {exc}", status=502,
                                content_type="text/plain")
        content, media_type = found or (b"The plugin has no such file.", "text/plain")
        response = HttpResponse(content, content_type=media_type or "application/octet-stream",
                                status=200 if found else 404)
        # The frame's origin is its own: its scripts read the page's files (or learn one is
        # missing, as the SDK's translations do) across origins.
        response["Access-Control-Allow-Origin"] = "*"
        response["Cache-Control"] = "private, no-store"
        return response
