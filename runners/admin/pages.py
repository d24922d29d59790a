"""Admin pages that are not a model's changelist."""

import time

from asgiref.sync import async_to_sync
from django.contrib import admin
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse

from ledger.models import AgentRun
from runners.admin.dashboard import dashboard_context
from runners.box import server as box_server
from runners.box import services as box_services
from runners.conversations import selectors
from runners.models import AgentInstance, PluginInstallation, RunnerDescriptor
from runners.plugins.gateway import get_gateway

WORKSPACES_SHOWN = 100


async def _runtime_status() -> dict:
    return await get_gateway().status()


def runtime_status(request):
    """Mode, state, uptime, plugins, runners and the last error of the runtime link; the
    sandbox box server and the conversations' workspaces."""
    status = async_to_sync(_runtime_status)()
    uptime = status.get("uptime")
    context = {
        **admin.site.each_context(request),
        "title": "Plugin runtime",
        "status": status,
        "uptime": time.strftime("%H:%M:%S", time.gmtime(uptime)) if uptime else "—",
        "installations": PluginInstallation.objects.order_by("author", "name"),
        "runners": RunnerDescriptor.objects.order_by("-available", "id"),
        "box": box_server.status(),
        "workspaces": box_services.workspaces()[:WORKSPACES_SHOWN],
    }
    return TemplateResponse(request, "admin/runners/runtime_status.html", context)


def dashboard_index(request, extra_context=None):
    """The admin index with the operator's dashboard above the app list."""
    return admin.site.index(request, extra_context={"dashboard": dashboard_context(),
                                                    **(extra_context or {})})


def playground(request):
    """Chat with an agent instance (or, for superusers, any runner) and watch its runs."""
    agents = (selectors.visible_agents(request.user)
              .exclude(status=AgentInstance.Status.TERMINATED)
              .order_by("project__name", "name"))
    runners = RunnerDescriptor.objects.none()
    if request.user.is_superuser:
        # Runners declared for platform events only take no chat messages.
        runners = [runner for runner in
                   RunnerDescriptor.objects.filter(available=True).order_by("source", "id")
                   if "agent" in (runner.usages or ["agent"])]
    context = {
        **admin.site.each_context(request),
        "title": "Playground",
        "agents": agents,
        "runners": runners,
        "selected": request.GET.get("target", ""),
    }
    return TemplateResponse(request, "admin/runners/playground.html", context)


def run_detail(request, run_id):
    """`/admin/runs/<run_id>/`: the run's change page, found by its run id."""
    run = get_object_or_404(AgentRun, run_id=run_id)
    return redirect("admin:ledger_agentrun_change", run.pk)
