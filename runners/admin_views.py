"""Admin pages that are not a model's changelist."""

import time

from asgiref.sync import async_to_sync
from django.contrib import admin
from django.template.response import TemplateResponse

from .gateway import get_gateway
from .models import PluginInstallation, RunnerDescriptor


async def _runtime_status() -> dict:
    return await get_gateway().status()


def runtime_status(request):
    """Mode, state, uptime, plugins, runners and the last error of the runtime link."""
    status = async_to_sync(_runtime_status)()
    uptime = status.get("uptime")
    context = {
        **admin.site.each_context(request),
        "title": "Plugin runtime",
        "status": status,
        "uptime": time.strftime("%H:%M:%S", time.gmtime(uptime)) if uptime else "—",
        "installations": PluginInstallation.objects.order_by("author", "name"),
        "runners": RunnerDescriptor.objects.order_by("-available", "id"),
    }
    return TemplateResponse(request, "admin/runners/runtime_status.html", context)
