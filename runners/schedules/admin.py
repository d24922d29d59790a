"""Schedules in the admin: what runs when, the next tick, and the runs each started."""

from django import forms
from django.contrib import admin
from django.utils import timezone
from django.utils.html import format_html

from ledger.admin_links import run_link
from runners.schedules import services
from runners.schedules.models import Schedule


class ScheduleForm(forms.ModelForm):
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
        if bool(cleaned.get("agent")) == bool(cleaned.get("runner_id")):
            self.add_error("agent", "Choose an agent, or give a runner id.")
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

    def save_model(self, request, obj, form, change):
        if not change:
            obj.created_by = request.user
        services.save(obj)
