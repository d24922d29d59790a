"""Runs and runners: the request that starts a run, the runs and events it leaves in the ledger,
and the bodies `POST /runs` answers with (one outcome, or NDJSON frames with `?stream=1`)."""

import pydantic
from drf_spectacular.utils import PolymorphicProxySerializer
from rest_framework import serializers

from langhost.base.serializers import RequestSerializer
from ledger import wire
from ledger.models import AgentRun, AgentRunEvent, ModelCall
from ledger.selectors.runs import event_dict
from runners.models import RunnerDescriptor
from runners.protocol import MULTITASK_STRATEGIES, EventInput
from runners.webhooks import services as webhooks


class PlatformEventSerializer(RequestSerializer):
    """A typed platform event (LangBot's EBA event: `type` and its fields in `data`) for a
    runner declared for it (`event` usage, `spec.events`). A `message.received` event's text
    is its `message_chain`'s."""

    type = serializers.RegexField(
        r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$", help_text="e.g. `group.member_joined`",
        error_messages={"invalid": "Use 1-128 letters, digits, '.', '_', ':' or '-'."})
    data = serializers.DictField(required=False, default=dict)


class WebhookField(serializers.URLField):
    """Where the run's outcome is POSTed when it ends (signed with the project's secret)."""

    def __init__(self, **kwargs):
        super().__init__(max_length=2000, required=False, help_text=(
            "Where the run's outcome is POSTed when it ends, signed with the project's "
            "webhook secret (private addresses refused)."), **kwargs)

    def to_internal_value(self, data):
        try:
            return webhooks.check_url(super().to_internal_value(data))
        except webhooks.WebhookError as exc:
            raise serializers.ValidationError(str(exc)) from None


class MultitaskStrategyField(serializers.ChoiceField):
    """What the message does if its conversation has an active run."""

    def __init__(self, **kwargs):
        super().__init__(choices=MULTITASK_STRATEGIES, required=False, help_text=(
            "If the conversation has an active run: `enqueue` (run once it ended), `reject` "
            "(409 naming it), `interrupt` (cancel it, then run) or `steer` (join it, for "
            "runners that steer). Default: the agent type's; else steer if the runner "
            "steers, else enqueue."), **kwargs)


class RunRequestSerializer(RequestSerializer):
    runner_id = serializers.CharField(max_length=255, required=False)
    agent_id = serializers.UUIDField(required=False)
    binding_id = serializers.CharField(max_length=255, required=False)
    input = serializers.DictField(required=False, default=dict,
                                  help_text="`{text, attachments?}`; a message")
    event = PlatformEventSerializer(required=False,
                                    help_text="`{type, data}`: a platform event instead of a "
                                              "message")
    event_id = serializers.CharField(max_length=128, required=False)
    conversation_id = serializers.CharField(max_length=128, required=False)
    timeout = serializers.FloatField(min_value=0.1, max_value=3600, required=False)
    webhook = WebhookField()
    multitask_strategy = MultitaskStrategyField()

    def validate_input(self, value):
        text = value.get("text", "")
        if not isinstance(text, str):
            raise serializers.ValidationError("input.text must be a string.")
        if len(text) > 20_000:
            raise serializers.ValidationError("input.text is longer than 20000 characters.")
        try:
            EventInput.model_validate(value)
        except pydantic.ValidationError as exc:
            raise serializers.ValidationError([
                f"input.{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
                for error in exc.errors(include_url=False)]) from None
        return value

    def validate(self, attrs):
        targets = [name for name in ("runner_id", "agent_id", "binding_id") if attrs.get(name)]
        if len(targets) != 1:
            raise serializers.ValidationError(
                {"runner_id": ["Give exactly one of runner_id, agent_id or binding_id."]}
            )
        if not attrs.get("input") and not attrs.get("event"):
            raise serializers.ValidationError(
                {"input": ["Give a message as input, or a platform event as event."]})
        return attrs


class RunSerializer(serializers.ModelSerializer):
    usage = serializers.JSONField(source="usage_json", read_only=True)
    duration_seconds = serializers.FloatField(read_only=True)

    class Meta:
        model = AgentRun
        fields = [
            "run_id", "event_id", "agent_id", "binding_id", "runner_id", "parent_run_id",
            "conversation_id", "thread_id", "project_id", "status", "status_reason", "usage",
            "deadline_at",
            "started_at", "finished_at", "cancel_requested_at", "duration_seconds", "created_at",
        ]


class RunDetailSerializer(RunSerializer):
    steps = serializers.ListField(
        child=serializers.CharField(), read_only=True,
        help_text="The ids of the runs that are its steps (a workflow's steps, the calls of "
                  "its agent tools), in the order they started.")

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "steps"]


class ModelCallSerializer(serializers.ModelSerializer):
    """One call a run made to a model (each fallback attempt is one): what it cost, how long
    it took, how it ended."""

    cost = serializers.DecimalField(max_digits=14, decimal_places=8, coerce_to_string=False)

    class Meta:
        model = ModelCall
        fields = ["id", "caller", "model_id", "model_name", "provider_name", "upstream_model",
                  "operation", "attempt", "status", "error", "input_tokens", "output_tokens",
                  "cached_tokens", "cost", "latency_ms", "first_token_ms", "created_at"]


class RunEventSerializer(serializers.ModelSerializer):
    """One event of a run: `ledger.wire.RunEvent` (this serializer documents it)."""

    data = serializers.JSONField(source="data_json")
    usage = serializers.JSONField(source="usage_json")

    class Meta:
        model = AgentRunEvent
        fields = list(wire.RunEvent.model_fields)

    def to_representation(self, instance):
        return event_dict(instance)


class RunnerSerializer(serializers.ModelSerializer):
    class Meta:
        model = RunnerDescriptor
        fields = [
            "id", "source", "label", "description", "plugin_author", "plugin_name",
            "plugin_version", "runner_name", "config_schema", "capabilities", "permissions",
            "usages", "supported_event_patterns", "available", "last_seen_at",
        ]


# --- what starting a run answers ------------------------------------------------------------

class RunMessageSerializer(serializers.Serializer):
    """One result of the runner delivered to the caller, with its ledger sequence."""

    run_id = serializers.CharField()
    sequence = serializers.IntegerField()
    type = serializers.CharField(help_text=(
        "`message.delta`, `message.completed`, `tool.call.started` / `tool.call.completed` "
        "(a tool the runner calls: name and arguments, then result or error), or "
        "`interaction.requested`: a question for "
        "the user (LangBot's InteractionRequest with its one-time `token`), answered at "
        "`POST .../conversations/{id}/interactions/{interaction_id}`"))
    data = serializers.JSONField()
    usage = serializers.JSONField(allow_null=True)


class BackgroundRunSerializer(serializers.Serializer):
    """A run started in the background (`?background=1`): its id and status as it started
    (`running`, `queued`, or how it ended if it ended at once). Follow it with
    `GET /runs/{run_id}?wait=N` or `ws/runs/{run_id}/`."""

    run_id = serializers.CharField(allow_null=True)
    status = serializers.CharField(allow_null=True)
    conversation_id = serializers.CharField(allow_null=True, required=False)
    event_id = serializers.CharField(required=False)


class RunOutcomeSerializer(serializers.Serializer):
    """How a run ended. Only the keys the outcome has are shown: a run that never started has
    no runner, and a streamed outcome has no `messages` (they were streamed)."""

    run_id = serializers.CharField(allow_null=True)
    event_id = serializers.CharField(help_text="The caller's own event id.")
    status = serializers.CharField(allow_null=True, help_text="The run's status, `steered` "
                                   "when the input was absorbed into an active run.")
    status_reason = serializers.CharField(required=False)
    usage = serializers.JSONField(required=False, allow_null=True)
    runner_id = serializers.CharField(required=False)
    agent_id = serializers.CharField(required=False, allow_null=True)
    conversation_id = serializers.CharField(required=False, allow_null=True)
    messages = RunMessageSerializer(many=True, required=False)

    def to_representation(self, instance):
        shown = super().to_representation(instance)
        return {key: value for key, value in shown.items() if key in instance}


class RunRefusedSerializer(serializers.Serializer):
    """The run could not start: 409 when its conversation is busy and its strategy is
    `reject`, else 503 (in a stream, a frame: the status is 201 already)."""

    type = serializers.CharField(help_text="`run.refused`")
    detail = serializers.CharField()
    active_run_id = serializers.CharField(required=False,
                                          help_text="The conversation's active run (409).")


class RunStartedFrameSerializer(serializers.Serializer):
    type = serializers.CharField(help_text="`run.started`")
    run_id = serializers.CharField()
    event_id = serializers.CharField()


class RunFinishedFrameSerializer(RunOutcomeSerializer):
    type = serializers.CharField(help_text="`run.finished`")


RUN_RESULT = PolymorphicProxySerializer(
    component_name="RunResult",
    serializers=[RunOutcomeSerializer, RunRefusedSerializer],
    resource_type_field_name=None,
)

RUN_STREAM_FRAME = PolymorphicProxySerializer(
    component_name="RunStreamFrame",
    serializers=[RunStartedFrameSerializer, RunMessageSerializer, RunFinishedFrameSerializer,
                 RunRefusedSerializer],
    resource_type_field_name=None,
)
