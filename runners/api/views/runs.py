"""Runs and runners over DRF, dispatched on the event loop (`langhost.base.async_views`).

Starting a run asks the one door (`runners.conversations.services`; an agent's run in a thread
hop, a runner's on the loop), then runs it on the loop (`runners.api.streaming`).
"""

import asyncio

from asgiref.sync import sync_to_async
from django.utils.http import content_disposition_header
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.permissions import IsSuperuser
from langhost.base import keyset
from langhost.base.api import BadInput, Gone
from langhost.base.async_views import AsyncDispatch
from ledger.models import AgentRun
from ledger.selectors import conversations as conversation_selectors
from ledger.selectors import model_calls as model_call_selectors
from ledger.selectors import runs as run_selectors
from runners.api import streaming
from runners.api.exceptions import RuntimeUnreachable
from runners.api.files import file_response
from runners.api.serializers.runs import (
    RUN_RESULT,
    RUN_STREAM_FRAME,
    BackgroundRunSerializer,
    ModelCallSerializer,
    RunDetailSerializer,
    RunEventSerializer,
    RunnerSerializer,
    RunRequestSerializer,
    RunSerializer,
)
from runners.conversations import selectors
from runners.conversations import services as door
from runners.conversations.callers import Caller
from runners.execution import attachments
from runners.models import RunnerDescriptor
from runners.plugins.gateway import get_gateway
from runners.runtime.errors import RuntimeLinkError

# `GET /runs/{id}?wait=N`: the longest wait, and how often the run is looked at meanwhile.
MAX_WAIT_SECONDS = 60
WAIT_POLL_SECONDS = 0.1


class RunViewSet(AsyncDispatch, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Start runs, list them, read their events, cancel them."""

    serializer_class = RunSerializer
    lookup_field = "run_id"
    lookup_value_regex = r"[^/]+"
    # `parent_run_id`: a workflow run's steps.
    filterset_fields = ["status", "runner_id", "agent_id", "conversation_id", "project_id",
                        "parent_run_id"]
    filter_backends = [DjangoFilterBackend]
    pagination_class = None  # its lists are keyset pages (`langhost.base.keyset`)

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation: no signed-in user
            return AgentRun.objects.none()
        return self._narrowed(selectors.visible_runs(self.request.user))

    def _narrowed(self, runs):
        conversation_id = self.request.query_params.get("conversation_id")
        if conversation_id:
            # The caller's own conversation of that id, or a ledger conversation id.
            mine = conversation_selectors.owned_by(str(self.request.user.pk), conversation_id)
            runs = runs.filter(conversation_id__in=[
                conversation_id, *mine.values_list("conversation_id", flat=True)])
        return runs

    @extend_schema(parameters=[
        OpenApiParameter("cursor", str, description="Where the page starts: a `next` or "
                         "`previous` link's cursor."),
        OpenApiParameter("page_size", int, description=f"1 to {keyset.MAX_PAGE_SIZE}.")],
        responses=OpenApiResponse(keyset.page_serializer(RunSerializer),
            description="Newest first, a page at a time by cursor (no total: counting a "
                        "ledger costs what it holds)."))
    def list(self, request, *args, **kwargs):
        """The runs the caller sees, newest first: theirs, and (for a project's owner) the
        project's; a keyset page, the same cost at any depth and ledger size."""
        page = keyset.KeysetPage([self.filter_queryset(self._narrowed(runs)) for runs in
                                  selectors.visible_run_sets(request.user)], request)
        return page.response(RunSerializer(page.rows, many=True).data)

    def get_serializer_class(self):
        return RunRequestSerializer if self.action == "create" else RunSerializer

    @extend_schema(
        request=RunRequestSerializer,
        parameters=[OpenApiParameter("stream", bool, description="NDJSON frames as results arrive"),
                    OpenApiParameter("background", bool, description=(
                        "Start the run apart from the request and answer 202 at once: it "
                        "goes on when the client leaves (a foreground run is cancelled)."))],
        responses={
            (202, "application/json"): OpenApiResponse(BackgroundRunSerializer, description=(
                "With `?background=1`: the run started, or `queued` behind its "
                "conversation's active run (409 or 503 with `run.refused` if it could "
                "not). Follow it with `GET /runs/{run_id}?wait=N` or `ws/runs/{run_id}/`.")),
            (201, "application/json"): OpenApiResponse(RUN_RESULT, description=(
                "JSON: once the run has ended, its outcome with every message. NDJSON "
                "(`?stream=1`): one frame per line, `run.started`, the run's messages as they "
                "arrive, then `run.finished` with the outcome. Either way `run.refused` if the "
                "runner could not start the run.")),
            (201, "application/x-ndjson"): RUN_STREAM_FRAME,
        },
    )
    async def create(self, request, *args, **kwargs):
        serializer = RunRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        prepared = await prepare(Caller(request.user), serializer.validated_data)
        prepared.webhook = serializer.validated_data.get("webhook", "")
        if streaming.wants_background(request):
            return await streaming.background_response(prepared)
        stream = streaming.wants_stream(request)
        return await streaming.response(streaming.run_body(prepared, stream), stream, prepared)

    @extend_schema(parameters=[OpenApiParameter("wait", float, description=(
        f"Seconds (at most {MAX_WAIT_SECONDS}) to wait for the run to end before answering "
        "it as it is then."))], responses=RunDetailSerializer)
    async def retrieve(self, request, *args, **kwargs):
        """A run, with its steps' ids; with `?wait=N`, once it has ended or N seconds have
        passed."""
        raw = request.query_params.get("wait", "0")
        try:
            wait = float(raw)
        except ValueError:
            raise BadInput("wait must be a number of seconds.", field="wait") from None
        if not 0 <= wait <= MAX_WAIT_SECONDS:
            raise BadInput(f"wait must be 0 to {MAX_WAIT_SECONDS} seconds.", field="wait")
        run = await sync_to_async(self.get_object)()
        loop = asyncio.get_running_loop()
        until = loop.time() + wait
        while not run.is_terminal and loop.time() < until:
            await asyncio.sleep(min(WAIT_POLL_SECONDS, max(until - loop.time(), 0)))
            await run.arefresh_from_db()
        run.steps = await run_selectors.steps_of(run.run_id)
        return Response(RunDetailSerializer(run).data)

    @extend_schema(
        parameters=[OpenApiParameter("after_sequence", int, description=(
                        "Only the events after this sequence number.")),
                    OpenApiParameter("cursor", str), OpenApiParameter("page_size", int)],
        responses=OpenApiResponse(keyset.page_serializer(RunEventSerializer),
            description="In sequence order, a page at a time by cursor; `total` counts the "
                        "events (after `after_sequence`), cheap within one run."))
    @action(detail=True)
    def events(self, request, run_id=None):
        run = self.get_object()
        try:
            after = int(request.query_params.get("after_sequence", 0))
        except ValueError:
            raise BadInput("after_sequence must be an integer.", field="after_sequence") from None
        events = run_selectors.events_after(run.run_id, after)
        page = keyset.KeysetPage([events], request, key="sequence", newest_first=False,
                                 total=events.count)
        return page.response(RunEventSerializer(page.rows, many=True).data)

    @extend_schema(
        parameters=[OpenApiParameter("cursor", str), OpenApiParameter("page_size", int)],
        responses=OpenApiResponse(keyset.page_serializer(ModelCallSerializer),
            description="The run's model calls in the order they were made (each fallback "
                        "attempt a call of its own), a page at a time by cursor."))
    @action(detail=True, url_path="model-calls")
    def model_calls(self, request, run_id=None):
        run = self.get_object()
        calls = model_call_selectors.of_run(run.run_id)
        page = keyset.KeysetPage([calls], request, newest_first=False, total=calls.count)
        return page.response(ModelCallSerializer(page.rows, many=True).data)

    @extend_schema(request=None, responses=RunSerializer)
    @action(detail=True, methods=["post"])
    async def cancel(self, request, run_id=None):
        run = await door.cancel(Caller(request.user), run_id)
        return Response(RunSerializer(run).data)


async def prepare(caller: Caller, data: dict) -> door.PreparedRun:
    """The one door's answer to a `POST /runs` body."""
    common = {"event_input": data["input"], "event_id": data.get("event_id"),
              "conversation_id": data.get("conversation_id"), "timeout": data.get("timeout"),
              "multitask": data.get("multitask_strategy")}
    if data.get("event"):
        common.update(event_type=data["event"]["type"], event_data=data["event"]["data"])
    if data.get("agent_id"):
        return await sync_to_async(door.prepare_agent_run)(caller, agent_id=data["agent_id"],
                                                           **common)
    return await door.prepare_runner_run(caller, runner_id=data.get("runner_id"),
                                         binding_id=data.get("binding_id"), **common)


class RunnerViewSet(AsyncDispatch, viewsets.ReadOnlyModelViewSet):
    """Runner descriptors: plugin runners from the runtime and built-in ones."""

    serializer_class = RunnerSerializer
    queryset = RunnerDescriptor.objects.order_by("id")
    lookup_value_regex = r".+"
    filterset_fields = ["available", "source", "plugin_author", "plugin_name"]

    @extend_schema(request=None, responses={200: RunnerSerializer(many=True),
                                            503: OpenApiResponse(description="The runtime "
                                                                 "could not be asked.")})
    @action(detail=False, methods=["post"], permission_classes=[IsSuperuser])
    async def refresh(self, request):
        """Ask the runtime for its runners now."""
        try:
            await get_gateway().discover()
        except (RuntimeLinkError, RuntimeError, TimeoutError) as exc:
            raise RuntimeUnreachable(
                f"The runtime could not be asked for its runners: {exc}") from None
        return await sync_to_async(self.list)(request)

    @extend_schema(responses=OpenApiResponse(
        OpenApiTypes.OBJECT, description="`{mode, state, state_reason, connected_since, uptime, "
        "last_error, pid, sessions, ...}`"))
    @action(detail=False, permission_classes=[IsSuperuser])
    async def runtime(self, request):
        """The runtime link's state: mode, state, uptime, last error."""
        return Response(await get_gateway().status())


class RunAttachmentView(APIView):
    """A file of the run's message, through the link signed for the run
    (`runners.execution.attachments`): no credentials, while the run is active and the link
    fresh; refused after the run ends (410), for another run, expired or altered (404)."""

    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(
        operation_id="runs_attachment",
        responses={(200, "*/*"): OpenApiResponse(OpenApiTypes.BINARY,
                                                  description="The file's bytes."),
                   404: OpenApiResponse(description="No link of this run (or expired), or "
                                                    "the file is gone."),
                   410: OpenApiResponse(description="The run has ended.")})
    def get(self, request, run_id: str, token: str):
        try:
            opened = attachments.opened(run_id, token)
        except attachments.AttachmentRefused as exc:
            raise REFUSALS[exc.status](str(exc)) from None
        response = file_response(opened.file, opened.info.mime_type)
        response["Content-Disposition"] = content_disposition_header(
            True, opened.info.custom_metadata.get("file_name") or opened.info.name)
        response["ETag"] = f'"{opened.info.sha256}"'
        return response


REFUSALS = {404: NotFound, 410: Gone}
