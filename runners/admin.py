from django import forms
from django.contrib import admin, messages
from pydantic import ValidationError

from .bindings import to_protocol
from .models import AgentInstance, AgentType, Binding, InvalidTransition


@admin.register(AgentType)
class AgentTypeAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "runner_id", "primary_model", "is_active", "updated_at"]
    list_filter = ["is_active", "runner_id"]
    search_fields = ["name", "slug", "description"]
    ordering = ["name"]
    prepopulated_fields = {"slug": ["name"]}
    readonly_fields = ["id", "created_at", "updated_at"]


@admin.register(AgentInstance)
class AgentInstanceAdmin(admin.ModelAdmin):
    list_display = ["name", "agent_type", "project", "status", "created_at"]
    list_filter = ["status", "agent_type", "project"]
    search_fields = ["name", "project__name", "agent_type__name", "id"]
    readonly_fields = ["id", "status", "created_by", "created_at", "updated_at"]
    autocomplete_fields = ["project", "agent_type"]
    actions = ["pause", "resume", "terminate"]

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

    @admin.action(description="Pause selected agents")
    def pause(self, request, queryset):
        self._apply(request, queryset, "pause")

    @admin.action(description="Resume selected agents")
    def resume(self, request, queryset):
        self._apply(request, queryset, "resume")

    @admin.action(description="Terminate selected agents")
    def terminate(self, request, queryset):
        self._apply(request, queryset, "terminate")


class BindingForm(forms.ModelForm):
    """Policies are checked with the same model the orchestrator uses; errors name the field."""

    class Meta:
        model = Binding
        fields = ["binding_id", "enabled", "runner_id", "scope_type", "scope_id", "runner_config",
                  "state_policy", "delivery_policy", "resource_policy"]

    def clean(self):
        cleaned = super().clean()
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
                                  "then agent, project, global."}),
        ("Runner config and policies", {"fields": ["runner_config", "state_policy",
                                                   "delivery_policy", "resource_policy"]}),
        ("Dates", {"fields": ["created_at", "updated_at"]}),
    ]

    form = BindingForm
