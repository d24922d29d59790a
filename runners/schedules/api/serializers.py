import pydantic
from django.utils import timezone
from rest_framework import serializers

from ledger.selectors import runs as run_selectors
from runners.protocol import EventInput
from runners.schedules import services
from runners.schedules.models import Schedule

LAST_RUNS = 10


class ScheduleSerializer(serializers.ModelSerializer):
    agent_id = serializers.UUIDField(required=False, allow_null=True, help_text=(
        "The agent each run messages (one of the project's); or give `runner_id`."))
    last_runs = serializers.SerializerMethodField(
        help_text=f"Its latest {LAST_RUNS} runs, newest first.")

    class Meta:
        model = Schedule
        fields = ["id", "name", "cron", "timezone", "agent_id", "conversation_id", "runner_id",
                  "input", "enabled", "missed_ticks", "next_run_at", "last_run_at",
                  "last_run_id", "last_error", "last_runs", "created_at", "updated_at"]
        read_only_fields = ["id", "next_run_at", "last_run_at", "last_run_id", "last_error",
                            "created_at", "updated_at"]

    def get_last_runs(self, schedule) -> list[dict]:
        return run_selectors.started_by_event_prefix(schedule.event_prefix, LAST_RUNS)

    def validate_input(self, value):
        if not isinstance(value, dict):
            raise serializers.ValidationError('input must be an object: {"text": ...}.')
        if not isinstance(value.get("text", ""), str) or len(value.get("text", "")) > 20_000:
            raise serializers.ValidationError("input.text must be text of at most 20000 "
                                              "characters.")
        try:
            EventInput.model_validate(value)
        except pydantic.ValidationError as exc:
            raise serializers.ValidationError(str(exc.errors(include_url=False)[0]["msg"])) \
                from None
        return value

    def validate(self, attrs):
        merged = {**{field: getattr(self.instance, field) for field in (
            "cron", "timezone", "agent_id", "runner_id", "conversation_id")
            if self.instance is not None}, **attrs}
        try:
            services.next_tick(merged["cron"], merged.get("timezone") or "UTC",
                               timezone.now())
            services.check_target(self.context["request"].user, self.context["project"].pk,
                                  agent_id=merged.get("agent_id"),
                                  runner_id=merged.get("runner_id") or "",
                                  conversation_id=merged.get("conversation_id") or "")
        except services.ScheduleError as exc:
            raise serializers.ValidationError({exc.field: [str(exc)]}) from None
        return attrs
