from django.contrib import admin, messages

from .models import AgentInstance, AgentType, InvalidTransition


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
