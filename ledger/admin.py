import json

from django.contrib import admin, messages
from django.core.paginator import Paginator
from django.db.models import Max, Q
from django.urls import reverse
from django.utils import timezone
from django.utils.functional import cached_property
from django.utils.html import format_html, format_html_join

from ledger.admin_links import link, run_link, status_badge
from ledger.models import (
    TERMINAL_STATUSES,
    AgentRun,
    AgentRunEvent,
    AgentRunnerState,
    Artifact,
    Conversation,
    EventLog,
    Interaction,
    ModelCall,
    SteeringItem,
    Transcript,
)
from ledger.services import leases


def pretty(value) -> str:
    return format_html('<pre style="margin:0;white-space:pre-wrap">{}</pre>',
                       json.dumps(value, indent=2, ensure_ascii=False, default=str))


# The run page draws the newest events of a run at once and loads older ones on demand.
TIMELINE_TAIL = 200
# The forks of its conversation a run page links.
FORKS_SHOWN = 10


def timeline_page(run_id: str) -> dict:
    """What the run page starts from: the run's last sequence, how many of the newest events it
    draws, and the reply as it stood before them (the last completed message and its
    citations, or the deltas)."""
    events = AgentRunEvent.objects.filter(run_id=run_id)
    last = events.aggregate(last=Max("sequence"))["last"] or 0
    first_drawn = max(last - TIMELINE_TAIL, 0)
    before = events.filter(sequence__lte=first_drawn)
    reply, citations = "", []
    completed = before.filter(type="message.completed").order_by("-sequence").first()
    since = completed.sequence if completed else 0
    if completed:
        message = completed.data_json.get("message") or {}
        content = message.get("content")
        reply = content if isinstance(content, str) else ""
        citations = Transcript(content_json=message).citations
    for data in before.filter(type="message.delta", sequence__gt=since).order_by("sequence") \
            .values_list("data_json", flat=True):
        content = (data.get("chunk") or {}).get("content")
        reply += content if isinstance(content, str) else ""
    return {"last_sequence": last, "timeline_tail": TIMELINE_TAIL, "initial_reply": reply,
            "initial_citations": citations}


class LargeTablePaginator(Paginator):
    """Pages through a table that only grows without COUNT(*) over all of it (after
    Healthchecks' admin).

    Unfiltered, the count is estimated from the highest id (ledger rows are appended, rarely
    deleted: a few trailing pages may come up empty); filtered, rows are counted up to `CAP`.
    Below `CAP` rows either way the count is exact.
    """

    CAP = 10_000

    @cached_property
    def count(self) -> int:
        rows = self.object_list
        if not rows.query.where:
            estimate = rows.aggregate(highest=Max("pk"))["highest"] or 0
            if estimate > self.CAP:
                return estimate
        return rows[: self.CAP].count()


class ReadOnlyAdmin(admin.ModelAdmin):
    """The ledger records what happened: nobody edits it by hand.

    Its tables grow with every run, so their lists are never counted whole.
    """

    paginator = LargeTablePaginator
    show_full_result_count = False
    # A search finds rows whose id columns equal the term, each through its index: a
    # `LIKE '%…%'` over a table that only grows would read all of it.
    search_fields: list[str] = []

    def get_search_results(self, request, queryset, search_term):
        term = search_term.strip()
        if not term or not self.search_fields:
            return queryset, False
        match = Q()
        for field in self.search_fields:
            match |= Q(**{field: term})
        return queryset.filter(match), False

    class Media:
        css = {"all": ["langhost/css/langhost.css"]}

    # Columns for the ids ledger rows keep as strings: names, linked (`ledger.admin_links`).
    @admin.display(description="run")
    def run(self, row):
        return run_link(row.run_id) if row.run_id else "—"

    @admin.display(description="agent")
    def agent(self, row):
        return link("agent", row.agent_id)

    @admin.display(description="project")
    def project(self, row):
        return link("project", row.project_id)

    @admin.display(description="user")
    def user(self, row):
        return link("user", row.user_id)

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(AgentRun)
class AgentRunAdmin(ReadOnlyAdmin):
    list_display = ["run", "status_", "runner_id", "agent", "project", "duration", "created_at"]
    list_display_links = None
    # No filter listing a column's values and no date hierarchy: either reads every row.
    list_filter = ["status", "created_at"]
    search_fields = ["run_id", "event_id", "conversation_id"]
    actions = ["cancel_runs"]
    readonly_fields = [
        "run_id", "event_id", "status", "status_reason", "runner_id", "binding", "agent",
        "answered_by", "project", "conversation", "thread_id", "created_at", "started_at",
        "finished_at",
        "deadline_at", "cancel_requested_at", "usage", "authorization",
    ]
    fieldsets = [
        (None, {"fields": ["run_id", "status", "status_reason", "runner_id", "binding",
                           "agent", "answered_by", "project", "conversation", "thread_id",
                           "event_id"]}),
        ("Timing", {"fields": ["created_at", "started_at", "finished_at", "deadline_at",
                               "cancel_requested_at"]}),
        ("Usage", {"fields": ["usage"]}),
        ("Authorization snapshot", {"classes": ["collapse"], "fields": ["authorization"]}),
    ]

    def render_change_form(self, request, context, add=False, change=False, form_url="",
                           obj=None):
        # Calls name their run by run id, not a foreign key, so no inline can list them.
        if obj is not None:
            context["model_calls"] = ModelCall.objects.filter(run_id=obj.run_id).order_by("id")
            context.update(timeline_page(obj.run_id))
        return super().render_change_form(request, context, add, change, form_url, obj)

    @admin.display(description="status", ordering="status")
    def status_(self, run):
        return status_badge(run.status)


    @admin.display(description="conversation")
    def conversation(self, run):
        found = Conversation.objects.filter(conversation_id=run.conversation_id).values_list(
            "pk", flat=True).first() if run.conversation_id else None
        if found is None:
            return run.conversation_id or "—"
        forks = Conversation.objects.filter(forked_from=run.conversation_id).values_list(
            "pk", "conversation_id")[:FORKS_SHOWN]
        return format_html(
            '<a href="{}">{}</a>{}', reverse("admin:ledger_conversation_change", args=[found]),
            run.conversation_id, format_html_join(
                "", ' · <a href="{}" class="conversation-fork">fork {}</a>',
                ((reverse("admin:ledger_conversation_change", args=[pk]), forked_id)
                 for pk, forked_id in forks)))

    @admin.display(description="binding")
    def binding(self, run):
        if not run.binding_id or run.binding_id.startswith("agent:"):
            return run.binding_id or "—"  # an agent's own binding: the agent is linked below
        return format_html('<a href="{}?q={}">{}</a>',
                           reverse("admin:runners_binding_changelist"), run.binding_id,
                           run.binding_id)

    @admin.display(description="answered by")
    def answered_by(self, run):
        """The agent of its tree that answered (the tree's root or a sub-agent)."""
        return (run.metadata_json or {}).get("agent_name") or "—"

    @admin.display(description="duration")
    def duration(self, run):
        seconds = run.duration_seconds
        return "—" if seconds is None else f"{seconds:.2f} s"

    @admin.display(description="usage")
    def usage(self, run):
        return pretty(run.usage_json)

    @admin.display(description="authorization")
    def authorization(self, run):
        return pretty(run.authorization())

    def has_cancel_permission(self, request) -> bool:
        """The admin lists every run to whoever may view them: cancelling any of them is a
        superuser's (others cancel the runs they may see through the API)."""
        return request.user.is_superuser

    @admin.action(description="Cancel selected runs", permissions=["cancel"])
    def cancel_runs(self, request, queryset):
        # The flag is enough: the process running the run checks it within a second.
        active = [run for run in queryset if run.status not in TERMINAL_STATUSES]
        for run in active:
            leases.request_cancel_sync(run.run_id, f"cancelled by {request.user} in the admin")
        skipped = queryset.count() - len(active)
        self.message_user(request, f"Cancel requested for {len(active)} run(s).", messages.SUCCESS)
        if skipped:
            self.message_user(request, f"{skipped} run(s) had already ended.", messages.WARNING)


@admin.register(ModelCall)
class ModelCallAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "model_name", "provider_name", "status", "attempt",
                    "input_tokens", "output_tokens", "cached_tokens", "cost", "latency_ms",
                    "first_token_ms", "run", "caller"]
    list_filter = ["status"]
    search_fields = ["run_id", "agent_id"]
    readonly_fields = ["run"]

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(AgentRunnerState)
class AgentRunnerStateAdmin(ReadOnlyAdmin):
    list_display = ["state_key", "scope", "runner_id", "conversation_id", "actor_id", "updated_at"]
    list_filter = ["scope"]
    search_fields = ["state_key", "scope_key", "conversation_id"]
    readonly_fields = ["runner_id", "binding_identity", "scope", "scope_key", "state_key",
                       "value", "conversation_id", "thread_id", "actor_type", "actor_id",
                       "subject_type", "subject_id", "project_id", "created_at", "updated_at"]
    exclude = ["value_json"]

    @admin.display(description="value")
    def value(self, row):
        return pretty(row.value_json)

    def has_delete_permission(self, request, obj=None):
        return request.user.is_superuser


class RoleFilter(admin.SimpleListFilter):
    """A transcript line's role, from the roles there are (not a scan for them)."""

    title = "role"
    parameter_name = "role"

    def lookups(self, request, model_admin):
        return [(role, role) for role in ("user", "assistant", "tool", "system")]

    def queryset(self, request, queryset):
        return queryset.filter(role=self.value()) if self.value() else queryset


@admin.register(Transcript)
class TranscriptAdmin(ReadOnlyAdmin):
    list_display = ["id", "conversation_id", "role", "author", "short_content", "run",
                    "created_at"]
    list_filter = [RoleFilter]
    search_fields = ["conversation_id", "run_id"]

    @admin.display(description="content")
    def short_content(self, row):
        return row.content[:80]


@admin.register(EventLog)
class EventLogAdmin(ReadOnlyAdmin):
    list_display = ["event_id", "event_type", "source", "run", "project", "conversation_id",
                    "created_at"]
    search_fields = ["event_id", "conversation_id"]



@admin.register(SteeringItem)
class SteeringItemAdmin(ReadOnlyAdmin):
    list_display = ["event_id", "run", "status", "reason", "created_at"]
    list_filter = ["status"]
    search_fields = ["run_id"]


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdmin):
    list_display = ["conversation", "agent", "user", "project", "updated_at"]
    search_fields = ["conversation_id", "client_id", "title", "agent_id", "user_id"]
    readonly_fields = ["conversation_id", "client_id", "title", "agent", "user", "project",
                       "created_at", "updated_at"]
    fields = readonly_fields

    @admin.display(description="conversation", ordering="updated_at")
    def conversation(self, row):
        return row.title or row.client_id

    def render_change_form(self, request, context, add=False, change=False, form_url="",
                           obj=None):
        if obj is not None:
            context.update(conversation_page(obj))
        return super().render_change_form(request, context, add, change, form_url, obj)


# What the conversation page shows inline, newest runs first.
CONVERSATION_ROWS = 200


def tool_calls_by_run(run_ids: set[str]) -> dict[str, list[dict]]:
    """The tools each run called, in order, with their arguments and how each ended."""
    calls: dict[str, dict[str, dict]] = {}
    for run_id, type_, data in AgentRunEvent.objects.filter(
            run_id__in=run_ids, type__in=("tool.call.started", "tool.call.completed"),
            source="runner").order_by("run_id", "sequence").values_list(
            "run_id", "type", "data_json"):
        call = calls.setdefault(run_id, {}).setdefault(
            data.get("tool_call_id") or str(len(calls[run_id])), {"name": data.get("tool_name")})
        if type_ == "tool.call.started":
            call["arguments"] = json.dumps(data.get("parameters") or {})[:300]
        else:
            call["outcome"] = (f"failed: {data['error']}" if data.get("error") else
                               json.dumps(data.get("result"))[:300])
    return {run_id: list(by_id.values()) for run_id, by_id in calls.items()}


def conversation_page(conversation: Conversation) -> dict:
    """The conversation's transcript, its state by scope, its artifacts and its runs."""
    conversation_id = conversation.conversation_id
    state: dict[str, list] = {}
    for row in AgentRunnerState.objects.filter(conversation_id=conversation_id) \
            .order_by("scope", "state_key")[:CONVERSATION_ROWS]:
        state.setdefault(row.scope, []).append(row)
    transcript = list(Transcript.objects.filter(conversation_id=conversation_id)
                      .order_by("id")[:CONVERSATION_ROWS])
    calls = tool_calls_by_run({entry.run_id for entry in transcript
                               if entry.run_id and entry.role != "user"})
    for entry in transcript:  # a run's calls above its first reply
        entry.tool_calls = calls.pop(entry.run_id, []) if entry.role != "user" else []
    return {
        "transcript": transcript,
        "state_by_scope": sorted(state.items()),
        "artifacts": Artifact.objects.filter(conversation_id=conversation_id)
        .order_by("name", "-version")[:CONVERSATION_ROWS],
        "runs": AgentRun.objects.filter(conversation_id=conversation_id)
        .order_by("-id")[:CONVERSATION_ROWS],
        "interactions": Interaction.objects.filter(conversation_id=conversation_id)
        .order_by("-id")[:CONVERSATION_ROWS],
        "origin": Conversation.objects.filter(conversation_id=conversation.forked_from).first()
        if conversation.forked_from else None,
        "forks": Conversation.objects.filter(forked_from=conversation_id)
        .order_by("-id")[:CONVERSATION_ROWS],
        "now": timezone.now(),
    }


@admin.register(Interaction)
class InteractionAdmin(ReadOnlyAdmin):
    """Questions runs asked, and their answers (the conversation page answers them)."""

    list_display = ["title", "kind", "status", "run", "conversation_id", "expires_at",
                    "created_at"]
    list_filter = ["status", "kind"]
    search_fields = ["interaction_id", "run_id", "conversation_id", "title"]
    exclude = ["token_hash"]


@admin.register(Artifact)
class ArtifactAdmin(ReadOnlyAdmin):
    list_display = ["name", "version", "mime_type", "size", "conversation_id", "user",
                    "project", "created_at"]
    search_fields = ["name", "conversation_id", "user_id", "sha256"]
    readonly_fields = ["sha256", "storage_path"]
