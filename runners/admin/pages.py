"""Admin pages that are not a model's changelist."""

import time

from asgiref.sync import async_to_sync
from django.contrib import admin, messages
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.views.decorators.http import require_POST
from langbot_plugin.api.entities.builtin.runner.interaction import InteractionRequest

from ledger.selectors import conversations as conversation_selectors
from ledger.selectors import interactions as interaction_selectors
from ledger.selectors import runs as run_selectors
from runners import safety, work
from runners.admin.dashboard import dashboard_context
from runners.box import server as box_server
from runners.box import services as box_services
from runners.conversations import background, forks, interactions, selectors
from runners.conversations.callers import Caller
from runners.conversations.exceptions import Refused
from runners.models import AgentInstance, PluginInstallation, RunnerDescriptor
from runners.plugins.gateway import get_gateway
from runners.runtime.host_process import host_process
from runners.runtime.loop_bound import submit

WORKSPACES_SHOWN = 100


async def _runtime_status() -> dict:
    return await get_gateway().status()


def runtime_status(request):
    """Mode, state, uptime, plugins, runners and the last error of the runtime link; the
    sandbox box server and the conversations' workspaces; this process's background work."""
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
        "confinement": safety.report(),
        "workspaces": box_services.workspaces()[:WORKSPACES_SHOWN],
        "work": work.status(),
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
    run = get_object_or_404(run_selectors.all_runs(), run_id=run_id)
    return redirect("admin:ledger_agentrun_change", run.pk)


@require_POST
def answer_interaction(request, conversation_pk, interaction_pk):
    """The conversation page's answer to a question a run asked: through the door, as the
    conversation's user; the answer's run goes on in the background."""
    conversation = get_object_or_404(conversation_selectors.of_user(str(request.user.pk)),
                                     pk=conversation_pk)
    question = get_object_or_404(
        interaction_selectors.of_conversation(conversation.conversation_id), pk=interaction_pk)
    fields = InteractionRequest.model_validate(question.request_json).fields
    try:
        prepared = interactions.prepare_answer(
            Caller(request.user), agent_id=conversation.agent_id,
            conversation_id=conversation.client_id, interaction_id=question.interaction_id,
            action_id=request.POST.get("action_id") or None, source="admin",
            values={field.id: _posted(request.POST, field) for field in fields
                    if _posted(request.POST, field) is not None})
    except Refused as exc:
        messages.error(request, exc.detail)
    else:
        submit(background.start_in_background(prepared), host_process().loop)
        messages.success(request, f"Answered; run {prepared.run_id} goes on.")
    return redirect("admin:ledger_conversation_change", conversation.pk)


@require_POST
def fork_conversation(request, conversation_pk, entry_pk):
    """The conversation page's "fork here" (its user's own conversation): a new conversation
    as this one was at the entry; its page next."""
    conversation = get_object_or_404(conversation_selectors.of_user(str(request.user.pk)),
                                     pk=conversation_pk)
    try:
        forked = forks.fork(Caller(request.user), agent_id=conversation.agent_id,
                            project_id=None, conversation_id=conversation.client_id,
                            entry_id=entry_pk)
    except Refused as exc:
        messages.error(request, exc.detail)
        return redirect("admin:ledger_conversation_change", conversation.pk)
    messages.success(request, "Forked: this conversation as it was at that entry.")
    return redirect("admin:ledger_conversation_change", forked.pk)


@require_POST
def rerun_conversation(request, conversation_pk, entry_pk):
    """The conversation page's "re-run from here": the message answered again (edited when
    the form says so) in a fork; the fork's page next, its run going on in the background."""
    conversation = get_object_or_404(conversation_selectors.of_user(str(request.user.pk)),
                                     pk=conversation_pk)
    text = request.POST.get("text")
    try:
        prepared, forked = forks.prepare_rerun(
            Caller(request.user), agent_id=conversation.agent_id, project_id=None,
            conversation_id=conversation.client_id, entry_id=entry_pk,
            text=text if text not in (None, "") else None)
    except Refused as exc:
        messages.error(request, exc.detail)
        return redirect("admin:ledger_conversation_change", conversation.pk)
    submit(background.start_in_background(prepared), host_process().loop)
    messages.success(request, f"Re-running in this fork: run {prepared.run_id}.")
    return redirect("admin:ledger_conversation_change", forked.pk)


def _posted(posted, field):
    """A form field's value as the question's field takes it (None: not given)."""
    if field.type == "boolean":
        return field.id in posted
    if field.type == "multiselect":
        return posted.getlist(field.id) or None
    value = posted.get(field.id, "")
    if value == "":
        return None
    if field.type == "number":
        try:
            return float(value)
        except ValueError:
            return value  # the door says why it is not a number
    return value
