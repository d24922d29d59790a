import pydantic
from django.utils import timezone
from rest_framework import serializers

from ledger.models import AgentRun
from runners.conversations import services as door
from runners.conversations.exceptions import Refused
from runners.execution.protocol import EventInput
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
        # A range, not LIKE: SQLite's LIKE ignores case and cannot use the index.
        prefix = schedule.event_prefix
        return list(AgentRun.objects.filter(event_id__gte=prefix, event_id__lt=prefix + "\uffff")
                    .order_by("-id").values("run_id", "status", "created_at")[:LAST_RUNS])

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
        except services.ScheduleError as exc:
            raise serializers.ValidationError({exc.field: [str(exc)]}) from None
        if bool(merged.get("agent_id")) == bool(merged.get("runner_id")):
            raise serializers.ValidationError(
                {"agent_id": ["Give exactly one of agent_id or runner_id."]})
        caller = door.Caller(self.context["request"].user)
        project = self.context["project"]
        if merged.get("runner_id") and not caller.is_superuser:
            raise serializers.ValidationError(
                {"runner_id": ["Only superusers may schedule a runner directly."]})
        if merged.get("agent_id"):
            try:
                agent = door.find_agent(caller, merged["agent_id"], project.pk)
                if merged.get("conversation_id"):
                    door.find_conversation(caller, agent, merged["conversation_id"])
            except Refused as exc:
                raise serializers.ValidationError({exc.field or "agent_id": [exc.detail]}) \
                    from None
        return attrs
