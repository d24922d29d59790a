from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError as DjangoValidationError
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from pydantic import ValidationError

from ledger.admin import pretty
from ledger.selectors import conversations as conversation_selectors
from ledger.selectors import runs as run_selectors
from runners.admin import pickers
from runners.admin.secret_fields import show_config_without_secrets
from runners.catalogue import runner_config, services, tree_diagram
from runners.catalogue.agent_routing import TreeError
from runners.catalogue.bindings import to_protocol
from runners.catalogue.trees import build_tree, validate_trees
from runners.knowledge.models import KnowledgeBase
from runners.models import (
    AgentInstance,
    AgentType,
    Binding,
    InvalidTransition,
    KnowledgeRetrieval,
    RunnerDescriptor,
    SubAgent,
)
from runners.plugins.registry import runner_choices
from runners.providers import lookup
from runners.skills.models import Skill


class KnowledgeBaseChoices(forms.ModelMultipleChoiceField):
    def label_from_instance(self, obj):
        return f"{obj.project} / {obj.name}"


class AgentTypeForm(forms.ModelForm):
    knowledge_bases = KnowledgeBaseChoices(
        queryset=KnowledgeBase.objects.select_related("project").order_by("project__name",
                                                                         "name"),
        required=False, widget=forms.SelectMultiple(attrs={"size": 6}),
        help_text="The knowledge bases its agents search; an agent is granted only those of "
                  "its own project.")

    skills = forms.ModelMultipleChoiceField(
        queryset=Skill.objects.order_by("name"), to_field_name="name", required=False,
        widget=forms.SelectMultiple(attrs={"size": 6}),
        help_text="The installed skills its agents may activate.")

    class Meta:
        model = AgentType
        fields = [
            "name", "slug", "description", "expertise", "personality_prompt", "primary_model",
            "fallback_models", "model_params", "mcp_servers", "tools_requiring_approval",
            "knowledge_bases",
            "knowledge_retrieval", "skills", "box_enabled", "box_network", "webhook_url",
            "multitask_strategy",
            "is_active",
            "runner_id",
            "runner_config", "kind", "disallow_transfer_to_parent", "disallow_transfer_to_peers",
            "save_input_blobs_as_artifacts", "command_prefix", "event_plugins", "output_key",
            "max_iterations", "continue_on_step_failure", "output_schema", "guardrails",
            "agent_tools",
        ]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["knowledge_retrieval"].required = False  # left out: the default
        self.fields["max_iterations"].required = False  # left out: the default
        saved = None if self.instance._state.adding else self.instance
        self._pick_models(saved)
        servers = list(saved.mcp_servers) if saved and isinstance(saved.mcp_servers, list) else []
        self.fields["mcp_servers"] = forms.MultipleChoiceField(
            choices=pickers.mcp_server_choices(servers), required=False,
            widget=forms.SelectMultiple(attrs={"size": 5}),
            help_text="The MCP servers (MCP servers in the admin) whose tools its agents may use.")
        # The runners LangHost knows, and the type's own even if it is gone since; a new type
        # may leave the choice to the catalogue's rule (`default_runner`).
        choices = runner_choices()
        current = saved.runner_id if saved else None
        if current and current not in dict(choices):
            choices.append((current, f"{current} (unknown now)"))
        if saved is None:
            choices.insert(0, ("", "Automatic: the built-in LLM agent when a primary model is "
                                   "chosen, else echo"))
        self.fields["runner_id"] = forms.ChoiceField(
            choices=choices, required=saved is not None,
            initial="" if saved is None else current,
            help_text="The runner agents of this type run: a built-in one or a plugin's. "
                      "One that is not available now can be chosen; its runs wait for it.")
        if current and (fields := runner_config.described(runner_config.schema_of(current))):
            self.fields["runner_config"].help_text += f" {current} declares: {fields}."
        if secrets := runner_config.secrets_set(self.instance.runner_config or {}):
            # Secrets are write-only: left out here, kept unless given again (null clears).
            self.initial["runner_config"] = runner_config.shown(self.instance.runner_config)
            self.fields["runner_config"].help_text += (
                f" Secrets set (not shown; kept unless given again, null clears): "
                f"{', '.join(secrets)}.")
        if formed := [name[len(pickers.CONFIG_PREFIX):] for name in self.fields
                      if name.startswith(pickers.CONFIG_PREFIX)]:
            # The fields with a form field of their own are set there, not in the JSON box.
            self.initial["runner_config"] = {
                name: value for name, value in runner_config.shown(
                    self.instance.runner_config or {}).items() if name not in formed}
            self.fields["runner_config"].help_text = (
                "The runner's other config fields, as a JSON object (those above are set in "
                "their own fields; models, persona, MCP servers and knowledge bases come from "
                "the type's fields unless given here).")

    def _pick_models(self, saved: AgentType | None) -> None:
        """The primary and fallback models chosen among the registered ones."""
        primary = saved.primary_model if saved else ""
        fallbacks = ([name for name in saved.fallback_models if isinstance(name, str)]
                     if saved and isinstance(saved.fallback_models, list) else [])
        choices = pickers.model_choices([primary, *fallbacks])
        self.fields["primary_model"] = forms.ChoiceField(
            choices=[("", "— none —"), *choices], required=False,
            error_messages={"invalid_choice": "'%(value)s' is not a registered model: add it "
                                              "under LLM models first."},
            help_text="The registered model it thinks with (LLM models in the admin).")
        self.fields["fallback_models"] = pickers.OrderedChoicesField(
            choices, slots=max(3, len(fallbacks) + 1),
            help_text="Tried in this order when the primary model fails.")

    def clean_skills(self):
        return [skill.name for skill in self.cleaned_data["skills"]]

    def clean_knowledge_retrieval(self):
        return self.cleaned_data["knowledge_retrieval"] or KnowledgeRetrieval.AUTO

    def clean_knowledge_bases(self):
        return [str(knowledge_base.pk) for knowledge_base in self.cleaned_data["knowledge_bases"]]

    def clean_max_iterations(self):
        value = self.cleaned_data.get("max_iterations")
        return value if value is not None else AgentType._meta.get_field(
            "max_iterations").default

    def clean(self):
        """The catalogue's rules, as the API applies them (`catalogue.services`)."""
        cleaned = super().clean()
        if self.errors:
            return cleaned
        if any(name.startswith(pickers.CONFIG_PREFIX) for name in self.fields):
            cleaned["runner_config"] = pickers.with_config_fields(
                cleaned.get("runner_config") or {}, cleaned)
        saved = None if self.instance._state.adding else self.instance
        changes = {name: cleaned[name] for name in self.Meta.fields if name in cleaned}
        try:
            cleaned.update(services.prepare_agent_type(saved, changes))
        except services.CatalogueError as exc:
            for field, errors in exc.errors.items():
                messages_ = ([f"{name}: {error}" for name, error in errors.items()]
                             if isinstance(errors, dict) else errors)
                self.add_error(field if field in self.fields else None, messages_)
        return cleaned


class SubAgentFormSet(forms.BaseInlineFormSet):
    def clean(self):
        super().clean()
        if any(self.errors):
            return
        kept = [form.cleaned_data for form in self.forms
                if form.cleaned_data.get("child") and not form.cleaned_data.get("DELETE")]
        kept.sort(key=lambda data: data.get("position") or 0)
        children = [data["child"].pk for data in kept]
        if len(set(children)) != len(children):
            raise forms.ValidationError("An agent type is listed twice as a sub-agent.")
        try:
            validate_trees(self.instance, children)
        except DjangoValidationError as exc:
            raise forms.ValidationError(exc.messages) from exc


class SubAgentInline(admin.TabularInline):
    """The ordered sub-agents of this type: the tree its agents run (names unique per tree)."""

    model = SubAgent
    fk_name = "parent"
    fields = ["child", "position"]
    formset = SubAgentFormSet
    autocomplete_fields = ["child"]
    extra = 0
    ordering = ["position", "id"]
    verbose_name = "sub-agent"


@admin.register(AgentType)
class AgentTypeAdmin(admin.ModelAdmin):
    form = AgentTypeForm
    list_display = ["name", "slug", "kind", "runner_id", "primary_model", "is_active", "updated_at"]
    list_filter = ["is_active", "kind", "runner_id"]
    search_fields = ["name", "slug", "description"]
    ordering = ["name"]
    prepopulated_fields = {"slug": ["name"]}
    readonly_fields = ["id", "unknown_models", "agent_tree", "created_at", "updated_at"]
    inlines = [SubAgentInline]

    @admin.display(description="agent tree")
    def agent_tree(self, obj):
        """The tree its agents run, as saved: sub-agents in order, where each may hand the
        turn."""
        if obj.pk is None or obj._state.adding:
            return "—"
        try:
            return tree_diagram.svg(build_tree(obj))
        except TreeError as exc:
            return f"The saved tree is invalid: {exc}"

    def get_form(self, request, obj=None, change=False, **kwargs):
        """The form, with a field for each simple config field its runner declares."""
        schema = runner_config.schema_of(obj.runner_id) if obj is not None else []
        config_fields = pickers.runner_config_fields(
            runner_config.fields_of(schema), obj.runner_config or {} if obj else {},
            runner_config.secrets_set(obj.runner_config or {}) if obj else [])
        if config_fields:
            kwargs["form"] = type("AgentTypeConfigForm", (self.form,), config_fields)
        return super().get_form(request, obj, change, **kwargs)

    def save_model(self, request, obj, form, change):
        services.save_agent_type(obj, {})

    @admin.display(description="unknown models")
    def unknown_models(self, obj):
        """Names the type gives that no registered model has: kept, but nothing can call them."""
        return ", ".join(lookup.unknown_models(lookup.model_names(obj))) or "—"


@admin.register(AgentInstance)
class AgentInstanceAdmin(admin.ModelAdmin):
    list_display = ["name", "agent_type", "project", "status", "created_at"]
    list_filter = ["status", "agent_type", "project"]
    search_fields = ["name", "project__name", "agent_type__name", "id"]
    readonly_fields = ["id", "status", "created_by", "created_at", "updated_at", "activity"]
    autocomplete_fields = ["project", "agent_type"]
    actions = ["pause", "resume", "terminate"]

    @admin.display(description="conversations and runs")
    def activity(self, agent):
        if agent.pk is None:
            return "—"
        conversations = conversation_selectors.count_of_agent(str(agent.pk))
        runs = run_selectors.of_agent(str(agent.pk)).count()
        return format_html(
            '<a href="{}?agent_id={}">{} conversation(s)</a> · <a href="{}?agent_id={}">{} run(s)</a>'
            ' · <a href="{}?agent__id__exact={}">evaluation reports</a>'
            ' · <a href="{}" id="evaluate-agent">evaluate…</a>',
            reverse("admin:ledger_conversation_changelist"), agent.pk, conversations,
            reverse("admin:ledger_agentrun_changelist"), agent.pk, runs,
            reverse("admin:evals_evalreport_changelist"), agent.pk,
            reverse("admin:evals_evalreport_evaluate", args=[agent.pk]))

    def _apply(self, request, queryset, action_name):
        # Same rules as the API: each agent moves only if its current status allows it.
        moved = 0
        for agent in queryset:
            try:
                agent.transition(action_name)
                moved += 1
            except InvalidTransition as exc:
                self.message_user(request, f"{agent.name}: {exc}", messages.WARNING)
        if moved:
            self.message_user(request, f"{action_name.capitalize()}d {moved} agent(s).", messages.SUCCESS)

    @admin.action(description="Pause selected agents", permissions=["change"])
    def pause(self, request, queryset):
        self._apply(request, queryset, "pause")

    @admin.action(description="Resume selected agents", permissions=["change"])
    def resume(self, request, queryset):
        self._apply(request, queryset, "resume")

    @admin.action(description="Terminate selected agents", permissions=["change"])
    def terminate(self, request, queryset):
        self._apply(request, queryset, "terminate")


class BindingForm(forms.ModelForm):
    """Policies are checked with the same model the orchestrator uses; errors name the field.
    The runner config's secrets (the fields its runner declares `secret`) are write-only, as
    an agent type's are."""

    class Meta:
        model = Binding
        fields = ["binding_id", "enabled", "runner_id", "scope_type", "scope_id", "runner_config",
                  "state_policy", "delivery_policy", "resource_policy"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        show_config_without_secrets(self, "runner_config", self.instance.runner_config or {})

    def clean(self):
        cleaned = super().clean()
        if isinstance(cleaned.get("runner_config"), dict) and cleaned.get("runner_id"):
            cleaned["runner_config"] = runner_config.sealed(
                cleaned["runner_config"], runner_config.schema_of(cleaned["runner_id"]),
                self.instance.runner_config or {})
        try:
            to_protocol(Binding(**cleaned))
        except ValidationError as exc:
            for error in exc.errors():
                field = str(error["loc"][0]) if error["loc"] else None
                field = field if field in self.fields else None
                self.add_error(field, f"{'.'.join(map(str, error['loc']))}: {error['msg']}")
        return cleaned


@admin.register(Binding)
class BindingAdmin(admin.ModelAdmin):
    list_display = ["binding_id", "scope_type", "scope_id", "runner_id", "enabled", "updated_at"]
    list_filter = ["scope_type", "enabled", "runner_id"]
    search_fields = ["binding_id", "scope_id", "runner_id"]
    readonly_fields = ["created_at", "updated_at"]
    fieldsets = [
        (None, {"fields": ["binding_id", "enabled", "runner_id"]}),
        ("Scope", {"fields": ["scope_type", "scope_id"],
                   "description": "The most specific enabled binding answers: conversation, "
                                  "then agent, project, global; an agent with none runs with "
                                  "its type's runner. The scope id is the conversation's "
                                  "ledger id, the agent's or project's UUID, or empty for "
                                  "global."}),
        ("Runner config and policies", {"fields": ["runner_config", "state_policy",
                                                   "delivery_policy", "resource_policy"]}),
        ("Dates", {"fields": ["created_at", "updated_at"]}),
    ]

    form = BindingForm


PERMISSION_AREAS = ("models", "tools", "knowledge_bases", "history", "events", "storage",
                    "interactions")


@admin.register(RunnerDescriptor)
class RunnerDescriptorAdmin(admin.ModelAdmin):
    """What the runtime (or LangHost itself) can run. Discovery writes these; nobody edits them."""

    list_display = ["id", "display_label", "source", "plugin_version", "available", "last_seen_at"]
    list_filter = ["available", "source", "plugin_author"]
    search_fields = ["id", "runner_name", "plugin_name", "plugin_author"]
    fieldsets = [
        (None, {"fields": ["id", "source", "available", "last_seen_at", "label_text",
                           "description_text"]}),
        ("Plugin", {"fields": ["plugin_author", "plugin_name", "plugin_version", "runner_name"]}),
        ("Contract", {"fields": ["usages", "supported_event_patterns", "capability_list",
                                 "permission_list", "config_form"]}),
        ("Raw manifest", {"classes": ["collapse"], "fields": ["manifest"]}),
    ]
    readonly_fields = ["id", "source", "available", "last_seen_at", "label_text",
                       "description_text", "plugin_author", "plugin_name", "plugin_version",
                       "runner_name", "usages", "supported_event_patterns", "capability_list",
                       "permission_list", "config_form", "manifest"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.display(description="label")
    def label_text(self, obj):
        return obj.display_label

    @admin.display(description="description")
    def description_text(self, obj):
        description = obj.description or {}
        return description.get("en_US") or next(iter(description.values()), "") or "—"

    @admin.display(description="capabilities")
    def capability_list(self, obj):
        enabled = sorted(name for name, on in (obj.capabilities or {}).items() if on)
        return ", ".join(enabled) or "none"

    @admin.display(description="permissions")
    def permission_list(self, obj):
        permissions = obj.permissions or {}
        # In the manifest's order: JSON columns (PostgreSQL's jsonb) do not keep key order.
        areas = [area for area in PERMISSION_AREAS if area in permissions]
        areas += sorted(set(permissions) - set(PERMISSION_AREAS))
        granted = [f"{area}: {', '.join(permissions[area])}" for area in areas if permissions[area]]
        return "; ".join(granted) or "none"

    @admin.display(description="config form")
    def config_form(self, obj):
        items = obj.config_schema or []
        if not items:
            return "no settings"
        return format_html_join(
            "", "<p><code>{}</code> ({}){}: {}</p>",
            ((item.get("name"), item.get("type"), " required" if item.get("required") else "",
              (item.get("label") or {}).get("en_US", "")) for item in items),
        )

    @admin.display(description="manifest")
    def manifest(self, obj):
        return pretty(obj.raw_manifest)
