"""Schedules in the admin: what runs when, the next tick, and the runs each started."""

from django import forms
from django.contrib import admin
from django.utils import timezone
from django.utils.html import format_html

from ledger.admin_links import run_link
from runners.schedules import services
from runners.schedules.models import Schedule


class ScheduleForm(forms.ModelForm):
    """Checked as the API checks a schedule, for the user saving it (`user`, set by the
    admin): its runs start as them."""

    user = None

    class Meta:
        model = Schedule
        fields = ["name", "project", "cron", "timezone", "agent", "conversation_id", "runner_id",
                  "input", "enabled", "missed_ticks"]

    def clean(self):
        cleaned = super().clean()
        try:
            services.next_tick(cleaned.get("cron") or "", cleaned.get("timezone") or "UTC",
                               timezone.now())
        except services.ScheduleError as exc:
            self.add_error(exc.field, str(exc))
        if "project" not in cleaned:
            return cleaned  # its own error says why
        agent = cleaned.get("agent")
        try:
            services.check_target(self.user, cleaned["project"].pk,
                                  agent_id=agent.pk if agent else None,
                                  runner_id=cleaned.get("runner_id") or "",
                                  conversation_id=cleaned.get("conversation_id") or "")
        except services.ScheduleError as exc:
            field = "agent" if exc.field == "agent_id" else exc.field
            self.add_error(field if field in self.fields else None, str(exc))
        return cleaned


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):
    form = ScheduleForm
    list_display = ["name", "cron", "timezone", "agent", "runner_id", "enabled", "next_run_at",
                    "last_run", "last_error"]
    list_filter = ["enabled", "missed_ticks"]
    search_fields = ["name", "cron"]
    autocomplete_fields = ["agent"]
    readonly_fields = ["next_run_at", "last_run_at", "last_run", "last_error", "created_at",
                       "updated_at"]
    fields = ["name", "project", "cron", "timezone", "agent", "conversation_id", "runner_id",
              "input", "enabled", "missed_ticks", *readonly_fields]

    @admin.display(description="last run")
    def last_run(self, schedule):
        return run_link(schedule.last_run_id) if schedule.last_run_id else format_html("—")

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change, **kwargs)
        form.user = request.user
        return form

    def save_model(self, request, obj, form, change):
        # Its runs are its editor's from now on: the form checked the target for them.
        obj.created_by = request.user
        services.save(obj)
