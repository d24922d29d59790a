"""Runs and runners over DRF.

Starting a run validates in the view, then answers with a body produced by an async
iterator: the run streams on the event loop, never holding Django's shared sync thread.
"""

import json
from contextlib import aclosing

from asgiref.sync import async_to_sync
from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.response import Response

from accounts.models import Project
from accounts.permissions import IsSuperuser
from langhost.api import Unprocessable
from ledger.models import AgentRun, AgentRunEvent
from ledger.selectors import runs as readers
from runners.execution import registry
from runners.execution.agents import agent_binding_sync, user_event
from runners.execution.bindings import to_protocol
from runners.execution.orchestrator import Orchestrator, RunRefused, new_run_id
from runners.execution.protocol import AgentBinding
from runners.models import AgentInstance, Binding, RunnerDescriptor
from runners.plugins.gateway import get_gateway, require_runner_sync


class RunRequestSerializer(serializers.Serializer):
    runner_id = serializers.CharField(max_length=255, required=False)
    agent_id = serializers.UUIDField(required=False)
    binding_id = serializers.CharField(max_length=255, required=False)
    input = serializers.DictField()
    event_id = serializers.CharField(max_length=255, required=False)
    conversation_id = serializers.CharField(max_length=256, required=False)
    timeout = serializers.FloatField(min_value=0.1, max_value=3600, required=False)

    def validate_input(self, value):
        text = value.get("text", "")
        if not isinstance(text, str):
            raise serializers.ValidationError("input.text must be a string.")
        if len(text) > 20_000:
            raise serializers.ValidationError("input.text is longer than 20000 characters.")
        if not isinstance(value.get("attachments", []), list):
            raise serializers.ValidationError("input.attachments must be a list.")
        return value

    def validate(self, attrs):
        targets = [name for name in ("runner_id", "agent_id", "binding_id") if attrs.get(name)]
        if len(targets) != 1:
            raise serializers.ValidationError(
                {"runner_id": ["Give exactly one of runner_id, agent_id or binding_id."]}
            )
        return attrs


class RunSerializer(serializers.ModelSerializer):
    usage = serializers.JSONField(source="usage_json", read_only=True)
    duration_seconds = serializers.FloatField(read_only=True)

    class Meta:
        model = AgentRun
        fields = [
            "run_id", "event_id", "agent_id", "binding_id", "runner_id", "conversation_id",
            "thread_id", "project_id", "status", "status_reason", "usage", "deadline_at",
            "started_at", "finished_at", "cancel_requested_at", "duration_seconds", "created_at",
        ]


class RunEventSerializer(serializers.ModelSerializer):
    data = serializers.JSONField(source="data_json")
    usage = serializers.JSONField(source="usage_json")

    class Meta:
        model = AgentRunEvent
        fields = ["run_id", "sequence", "type", "data", "usage", "source", "created_at"]


class RunnerSerializer(serializers.ModelSerializer):
    class Meta:
        model = RunnerDescriptor
        fields = [
            "id", "source", "label", "description", "plugin_author", "plugin_name",
            "plugin_version", "runner_name", "config_schema", "capabilities", "permissions",
            "usages", "supported_event_patterns", "available", "last_seen_at",
        ]


def ndjson(frame: dict) -> str:
    return json.dumps(frame, default=str) + "\n"


async def run_body(event, binding, run_id: str, stream: bool, agent_name: str = ""):
    """The response body: NDJSON frames as results arrive, or one JSON outcome at the end."""
    orchestrator = Orchestrator(get_gateway())
    try:
        if not stream:
            outcome = await orchestrator.run_to_end(event, binding, run_id=run_id,
                                                    agent_name=agent_name)
            yield json.dumps(outcome_body(outcome), default=str)
            return
        yield ndjson({"type": "run.started", "run_id": run_id, "event_id": event.event_id})
        # Closed explicitly when the client goes away, so the run ends `consumer_cancelled` now.
        async with aclosing(orchestrator.run(event, binding, run_id=run_id,
                                             agent_name=agent_name)) as messages:
            async for message in messages:
                yield ndjson(message.as_dict())
        yield ndjson({"type": "run.finished",
                      **outcome_body(await readers.run_outcome_for_event(event.event_id))})
    except RunRefused as exc:
        yield (ndjson if stream else json.dumps)({"type": "run.refused", "detail": str(exc)})


def outcome_body(outcome: dict) -> dict:
    keys = ("run_id", "status", "status_reason", "messages", "usage", "runner_id", "agent_id",
            "conversation_id", "event_id")
    return {key: outcome.get(key) for key in keys if key in outcome}


class RunViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Start runs, list them, read their events, cancel them."""

    serializer_class = RunSerializer
    lookup_field = "run_id"
    lookup_value_regex = r"[^/]+"
    filterset_fields = ["status", "runner_id", "agent_id", "conversation_id", "project_id"]
    ordering_fields = ["created_at", "finished_at", "status"]

    def get_queryset(self):
        runs = AgentRun.objects.order_by("-id")
        user = self.request.user
        if not user.is_superuser:
            visible = Project.objects.visible_to(user).values_list("pk", flat=True)
            runs = runs.filter(project_id__in=[str(pk) for pk in visible])
        return runs

    def get_serializer_class(self):
        return RunRequestSerializer if self.action == "create" else RunSerializer

    @extend_schema(
        request=RunRequestSerializer,
        parameters=[OpenApiParameter("stream", bool, description="NDJSON frames as results arrive")],
        responses={201: None},
    )
    def create(self, request, *args, **kwargs):
        serializer = RunRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        binding, agent = self._binding(data)
        self._require_runner(binding.runner_id)
        event = user_event(
            request.user, event_id=data.get("event_id"), conversation_id=data.get("conversation_id"),
            input=data["input"], project_id=str(agent.project_id) if agent else None,
            agent_id=str(agent.pk) if agent else None,
        )
        stream = request.query_params.get("stream") in {"1", "true", "yes"}
        body = run_body(event, binding, new_run_id(), stream, agent.name if agent else "")
        return StreamingHttpResponse(
            body, status=status.HTTP_201_CREATED,
            content_type="application/x-ndjson" if stream else "application/json",
        )

    def _binding(self, data) -> tuple[AgentBinding, AgentInstance | None]:
        user = self.request.user
        timeout = data.get("timeout")
        if data.get("agent_id"):
            visible = Project.objects.visible_to(user)
            agent = AgentInstance.objects.select_related("agent_type").filter(
                pk=data["agent_id"], project__in=visible).first()
            if agent is None:
                raise NotFound("Agent not found.")
            return agent_binding_sync(agent, timeout), agent
        if not user.is_superuser:
            raise PermissionDenied("Only superusers may run a runner or binding directly.")
        if data.get("binding_id"):
            stored = Binding.objects.filter(binding_id=data["binding_id"], enabled=True).first()
            if stored is None:
                raise Unprocessable("No enabled binding has this id.", field="binding_id")
            binding = to_protocol(stored)
        else:
            binding = AgentBinding(binding_id=f"api:{data['runner_id']}", runner_id=data["runner_id"],
                                   state_policy={"state_scopes": ["conversation", "actor"]})
        if timeout is not None:
            binding.runner_config = {**binding.runner_config, "timeout": timeout}
        return binding, None

    @staticmethod
    def _require_runner(runner_id: str) -> None:
        try:
            require_runner_sync(runner_id)
        except registry.RunnerNotFound as exc:
            raise Unprocessable(str(exc), field="runner_id") from exc

    @extend_schema(responses=RunEventSerializer(many=True),
                   parameters=[OpenApiParameter("after_sequence", int)])
    @action(detail=True)
    def events(self, request, run_id=None):
        run = self.get_object()
        try:
            after = int(request.query_params.get("after_sequence", 0))
        except ValueError:
            raise Unprocessable("after_sequence must be an integer.", field="after_sequence") from None
        events = AgentRunEvent.objects.filter(run_id=run.run_id, sequence__gt=after).order_by("sequence")
        page = self.paginate_queryset(events)
        return self.get_paginated_response(RunEventSerializer(page, many=True).data)

    @extend_schema(request=None, responses=RunSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request, run_id=None):
        run = self.get_object()
        if run.is_terminal:
            raise Unprocessable(f"Run {run.run_id} already ended with status '{run.status}'.",
                                current_status=run.status)
        async_to_sync(Orchestrator.cancel)(run.run_id, f"cancelled by {request.user.email}")
        run.refresh_from_db()
        return Response(RunSerializer(run).data)


class RunnerViewSet(viewsets.ReadOnlyModelViewSet):
    """Runner descriptors: plugin runners from the runtime and built-in ones."""

    serializer_class = RunnerSerializer
    queryset = RunnerDescriptor.objects.order_by("id")
    lookup_value_regex = r".+"
    filterset_fields = ["available", "source", "plugin_author", "plugin_name"]

    @extend_schema(request=None)
    @action(detail=False, methods=["post"], permission_classes=[IsSuperuser])
    def refresh(self, request):
        """Ask the runtime for its runners now."""
        async_to_sync(get_gateway().discover)()
        return self.list(request)

    @action(detail=False)
    def runtime(self, request):
        """The runtime link's state: mode, state, uptime, last error."""

        async def runtime_status():
            return await get_gateway().status()

        return Response(async_to_sync(runtime_status)())

