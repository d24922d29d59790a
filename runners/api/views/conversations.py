"""Conversations with an agent instance, their messages and their artifacts, over DRF.

Routes (all under `/api/v1/projects/{project_id}/agents/{agent_id}/conversations`):

- `POST /` create (201) `{conversation_id?, title?, state?}`; `GET /` the caller's conversations;
- `GET /{conversation_id}?limit=&after=` with state and recent entries; `PATCH` title/state
  (`null` deletes a key); `DELETE` (204) entries, session state and conversation files;
- `POST /{conversation_id}/messages[?stream=1]` `{text, attachments: [{name, mime_type,
  data (base64) | url}]}` -> `{run_id, agent, status, status_reason, reply, usage, ...}`;
- `.../artifacts`: `GET` list, `POST` upload (multipart `file`, or JSON `{name, mime_type?,
  data (base64) | text}`), `GET /{name}[?version=]` download, `GET /{name}/versions`,
  `DELETE /{name}[?version=]`.

A conversation belongs to the user who opened it: anyone else gets 404, whatever id they name
(ids are scoped to the agent and owner). Messages go through the one door
(`runners.conversations.services`) on Django's sync side; the run itself happens while the
response body streams, on the event loop (`runners.api.streaming`).
"""


from asgiref.sync import sync_to_async
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response

from langhost.base import keyset
from langhost.base.api import BadInput, Conflict, Gone, Unprocessable
from langhost.base.async_views import AsyncDispatch, rendered_here
from langhost.base.heavy_writes import heavy_write
from langhost.base.parsers import StrictJSONParser
from ledger.models import Artifact, Conversation
from ledger.selectors import conversations as conversation_selectors
from ledger.selectors.runs import clamp_limit
from ledger.services import conversations as conversation_services
from ledger.services.artifacts import (
    ArtifactError,
    ArtifactNotFound,
    ArtifactTooLarge,
    artifacts,
    max_bytes,
)
from runners.api import message_body, streaming
from runners.api.files import file_response
from runners.api.serializers.artifacts import (
    ArtifactSerializer,
    ArtifactUploadSerializer,
    ArtifactVersionSerializer,
)
from runners.api.serializers.conversations import (
    MESSAGE_RESULT,
    MESSAGE_STREAM_FRAME,
    ConversationDetailSerializer,
    ConversationSerializer,
    ConversationStateSerializer,
    CreateConversationSerializer,
    EntrySerializer,
    ForkSerializer,
    MessageSerializer,
    RerunSerializer,
    UpdateConversationSerializer,
)
from runners.api.serializers.runs import BackgroundRunSerializer
from runners.api.throttles import StateWriteThrottle
from runners.conversations import forks, targets
from runners.conversations import services as door
from runners.conversations.callers import Caller
from runners.models import AgentInstance

DEFAULT_ENTRY_LIMIT = 20


def conversation_dict(conversation, *, state=None, entries=None) -> dict:
    """The conversation as its serializer shows it: with its `state`, and its `entries`, when
    given."""
    if entries is not None:
        shape = ConversationDetailSerializer
    elif state is not None:
        shape = ConversationStateSerializer
    else:
        shape = ConversationSerializer
    return shape(conversation, context={"state": state, "entries": entries}).data


# --- helpers ------------------------------------------------------------------------------

def _version_param(request) -> int | None:
    raw = request.query_params.get("version")
    if raw in (None, ""):
        return None
    try:
        version = int(raw)
    except ValueError:
        version = 0
    if version < 1:
        raise BadInput("version must be a positive integer.", field="version")
    return version


class AgentScopedMixin:
    """The agent instance of the URL (one the caller sees) and the caller's conversations."""

    def get_agent(self) -> AgentInstance:
        if not hasattr(self, "_agent"):
            self._agent = door.find_agent(Caller(self.request.user), self.kwargs["agent_id"],
                                          self.kwargs["project_id"])
        return self._agent

    def get_conversation(self, conversation_id: str):
        return door.find_conversation(Caller(self.request.user), self.get_agent(),
                                      conversation_id)


# --- conversations ------------------------------------------------------------------------

class ConversationViewSet(AsyncDispatch, AgentScopedMixin, viewsets.GenericViewSet):
    """A user's conversations with one agent instance."""

    def get_throttles(self):
        if self.action in ("create", "partial_update"):
            return [StateWriteThrottle()]
        return super().get_throttles()

    lookup_url_kwarg = "conversation_id"
    lookup_value_regex = r"[^/]+"
    serializer_class = CreateConversationSerializer
    pagination_class = None  # its lists are keyset pages (`langhost.base.keyset`)

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation
            return Conversation.objects.none()
        return conversation_selectors.list_for(agent_id=str(self.get_agent().pk),
                                               user_id=str(self.request.user.pk))

    @extend_schema(
        parameters=[OpenApiParameter("cursor", str), OpenApiParameter("page_size", int)],
        responses=OpenApiResponse(keyset.page_serializer(ConversationSerializer),
            description="Latest activity first, a page at a time by cursor (no total). A "
                        "conversation active while you walk the pages moves to the front."))
    def list(self, request, **kwargs):
        page = keyset.KeysetPage([self.get_queryset()], request, key=("updated_at", "pk"))
        return page.response([conversation_dict(c) for c in page.rows])

    @extend_schema(responses={201: ConversationDetailSerializer})
    def create(self, request, **kwargs):
        agent = self.get_agent()
        if agent.status == AgentInstance.Status.TERMINATED:
            raise Gone(f"Agent '{agent.name}' is terminated; it takes no new conversations.")
        body = CreateConversationSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        identity = targets.state_identity(agent)
        try:
            conversation = conversation_services.create(
                project_id=str(agent.project_id), agent_id=str(agent.pk),
                user_id=str(request.user.pk), client_id=data.get("conversation_id"),
                title=data.get("title", ""), state=data.get("state"), identity=identity,
            )
        except conversation_services.ConversationExists as exc:
            raise Conflict(str(exc)) from exc
        except conversation_services.StateLimit as exc:
            raise Unprocessable(str(exc), field="state") from exc
        state = conversation_selectors.get_state(conversation, identity)
        return Response(conversation_dict(conversation, state=state, entries=[]),
                        status=status.HTTP_201_CREATED)

    @extend_schema(responses=ConversationDetailSerializer, parameters=[
        OpenApiParameter("limit", int, description=f"recent entries (default "
                                                    f"{DEFAULT_ENTRY_LIMIT}, max 100)"),
        OpenApiParameter("after", str, description="only entries created at/after (ISO 8601)"),
    ])
    def retrieve(self, request, conversation_id=None, **kwargs):
        conversation = self.get_conversation(conversation_id)
        raw_limit = request.query_params.get("limit")
        if raw_limit is not None and not raw_limit.isdigit():
            raise BadInput("limit must be a positive integer.", field="limit")
        after = None
        if raw_after := request.query_params.get("after"):
            try:
                after = parse_datetime(raw_after)
            except ValueError:  # well-formed but impossible, e.g. month 13
                after = None
            if after is None:
                raise ValidationError({"after": ["Give an ISO 8601 date-time, e.g. "
                                                 "2026-01-31T12:00:00Z."]})
            if timezone.is_naive(after):  # in the server's time zone, as Django reads one
                after = timezone.make_aware(after)
        entries = conversation_selectors.entries(
            conversation, limit=clamp_limit(raw_limit, DEFAULT_ENTRY_LIMIT), after=after)
        state = conversation_selectors.get_state(
            conversation, targets.state_identity(self.get_agent(), conversation))
        return Response(conversation_dict(conversation, state=state, entries=entries))

    @extend_schema(request=UpdateConversationSerializer, responses=ConversationStateSerializer)
    async def partial_update(self, request, conversation_id=None, **kwargs):
        # All of it (a body of megabytes parsed, written, answered) runs apart from the event
        # loop and from the thread that starts and ends runs.
        return await heavy_write(self._updated, request, conversation_id)

    def _updated(self, request, conversation_id: str) -> Response:
        body = UpdateConversationSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        conversation = self.get_conversation(conversation_id)
        identity = targets.state_identity(self.get_agent(), conversation)
        if "title" in data:
            conversation.title = data["title"]
            conversation.save(update_fields=["title", "updated_at"])
        try:
            state = conversation_services.update_state(conversation, identity,
                                                       data.get("state") or {})
        except conversation_services.StateLimit as exc:
            raise Unprocessable(str(exc), field="state") from exc
        return rendered_here(self, Response(conversation_dict(conversation, state=state)))

    def destroy(self, request, conversation_id=None, **kwargs):
        conversation = self.get_conversation(conversation_id)
        conversation_services.delete(conversation)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=MessageSerializer, parameters=[
        OpenApiParameter("stream", bool, description="NDJSON frames as results arrive"),
        OpenApiParameter("background", bool, description=(
            "Start the run apart from the request and answer 202 at once: it goes on when "
            "the client leaves."))],
        responses={
            (202, "application/json"): OpenApiResponse(BackgroundRunSerializer, description=(
                "With `?background=1`: the run started, or `queued` behind the "
                "conversation's active run (409 or 503 with `run.refused` if it could "
                "not).")),
            (201, "application/json"): OpenApiResponse(MESSAGE_RESULT, description=(
                "JSON: once the run has ended, the answering agent, its reply and the run's "
                "outcome. NDJSON (`?stream=1`): one frame per line, `run.started`, the run's "
                "messages as they arrive, then `run.finished` with the outcome. Either way "
                "`run.refused` if the runner could not start the run.")),
            (201, "application/x-ndjson"): MESSAGE_STREAM_FRAME,
        })
    @action(detail=True, methods=["post"])
    async def messages(self, request, conversation_id=None, **kwargs):
        """Send a message; the answering agent of the tree replies (see module doc)."""
        base = request.build_absolute_uri(request.path.rsplit("/messages", 1)[0])
        parts, webhook = message_body.message_parts(request.data), await sync_to_async(message_body.message_webhook)(
            request.data)
        prepared = await sync_to_async(door.prepare_agent_run)(
            Caller(request.user), agent_id=self.kwargs["agent_id"],
            project_id=self.kwargs["project_id"], conversation_id=conversation_id,
            parts=parts, artifact_url=f"{base}/artifacts",
            multitask=message_body.message_multitask(request.data))
        prepared.webhook = webhook
        if streaming.wants_background(request):
            return await streaming.background_response(prepared)
        stream = streaming.wants_stream(request)
        return await streaming.response(streaming.message_body(prepared, stream), stream,
                                        prepared)

    @extend_schema(request=ForkSerializer, responses={201: ConversationDetailSerializer})
    @action(detail=True, methods=["post"])
    def fork(self, request, conversation_id=None, **kwargs):
        """A new conversation that starts as this one was at an entry: its entries up to that
        one, and the session state its runs had written by then."""
        self.get_conversation(conversation_id)  # who may, before what they sent
        body = ForkSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        caller = Caller(request.user)
        forked = forks.fork(caller, agent_id=self.kwargs["agent_id"],
                            project_id=self.kwargs["project_id"],
                            conversation_id=conversation_id, **body.validated_data)
        identity = targets.state_identity(self.get_agent(), forked)
        return Response(conversation_dict(
            forked, state=conversation_selectors.get_state(forked, identity),
            entries=conversation_selectors.entries(forked, limit=DEFAULT_ENTRY_LIMIT)),
            status=status.HTTP_201_CREATED)

    @extend_schema(request=RerunSerializer, parameters=[
        OpenApiParameter("stream", bool, description="NDJSON frames as results arrive")],
        responses={(201, "application/json"): OpenApiResponse(MESSAGE_RESULT, description=(
            "As `.../messages`: the run in a new conversation (`conversation_id`) holding "
            "the entries before the message.")),
            (201, "application/x-ndjson"): MESSAGE_STREAM_FRAME})
    @action(detail=True, methods=["post"])
    async def rerun(self, request, conversation_id=None, **kwargs):
        """Answer a user message again (or produce an agent's reply again), optionally
        edited, in a fork of the conversation as it was just before that message."""
        await sync_to_async(self.get_conversation)(conversation_id)  # who may, first
        body = RerunSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        base = request.build_absolute_uri(request.path.rsplit(f"/{conversation_id}/", 1)[0])
        prepared, forked = await sync_to_async(forks.prepare_rerun)(
            Caller(request.user), agent_id=self.kwargs["agent_id"],
            project_id=self.kwargs["project_id"], conversation_id=conversation_id,
            artifact_url=None, **body.validated_data)
        stream = streaming.wants_stream(request)
        response = await streaming.response(
            streaming.message_body(prepared, stream), stream, prepared)
        response["Location"] = f"{base}/{forked.client_id}"
        return response

    @extend_schema(
        parameters=[OpenApiParameter("cursor", str), OpenApiParameter("page_size", int)],
        responses=OpenApiResponse(keyset.page_serializer(EntrySerializer),
            description="The conversation's transcript, newest first, a page at a time by "
                        "cursor (no total): `next` goes back in time."))
    @messages.mapping.get
    def transcript(self, request, conversation_id=None, **kwargs):
        """The conversation's entries, newest first: its users' messages and its agents'
        replies."""
        conversation = self.get_conversation(conversation_id)
        page = keyset.KeysetPage([conversation_selectors.transcript(conversation)], request)
        return page.response(EntrySerializer(page.rows, many=True).data)


# --- artifacts ----------------------------------------------------------------------------

class ArtifactViewSet(AgentScopedMixin, viewsets.GenericViewSet):
    """Versioned files of a conversation (and the user's `user:` files)."""

    lookup_url_kwarg = "name"
    lookup_value_regex = r"[^/]+"
    serializer_class = ArtifactUploadSerializer
    parser_classes = [StrictJSONParser, MultiPartParser]

    def get_queryset(self):  # only for schema generation: artifacts are read through the service
        return Artifact.objects.none()

    def scope(self) -> tuple[str, str, str]:
        conversation = self.get_conversation(self.kwargs["conversation_id"])
        return conversation.project_id, conversation.user_id, conversation.conversation_id

    @extend_schema(responses=ArtifactSerializer(many=True))
    def list(self, request, **kwargs):
        infos = artifacts.latest_infos(*self.scope())
        page = self.paginate_queryset(infos)
        return self.get_paginated_response(ArtifactSerializer(page, many=True).data)

    @extend_schema(responses={201: ArtifactVersionSerializer})
    def create(self, request, **kwargs):
        scope = self.scope()
        body = ArtifactUploadSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        sources = [key for key in ("file", "data", "text") if key in data]
        if len(sources) != 1:
            raise BadInput("Give exactly one of file (multipart), data (base64) or text.",
                           field="file")
        upload = data.get("file")
        name = data.get("name") or (upload.name if upload else "")
        mime_type = data.get("mime_type")
        content, text = None, None
        if upload is not None:
            if upload.size > max_bytes():
                raise message_body.PayloadTooLarge(str(ArtifactTooLarge(name, upload.size, max_bytes())))
            content, mime_type = upload.read(), mime_type or upload.content_type
        elif "data" in data:
            content, data_mime = message_body.decode_base64(data["data"], "data")
            mime_type = mime_type or data_mime
        else:
            text = data["text"]
        try:
            version = artifacts.save(*scope, name, data=content, text=text, mime_type=mime_type)
        except ArtifactTooLarge as exc:
            raise message_body.PayloadTooLarge(str(exc)) from exc
        except ArtifactError as exc:
            raise Unprocessable(str(exc), field="name") from exc
        info = artifacts.metadata(*scope, name, version)
        return Response(ArtifactVersionSerializer(info).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        parameters=[
            OpenApiParameter("version", int, description="default: the latest"),
            OpenApiParameter("X-Artifact-Version", int, OpenApiParameter.HEADER, response=True,
                             description="The version sent"),
        ],
        responses={(200, "*/*"): OpenApiResponse(
            OpenApiTypes.BINARY, description="The file's bytes, as its MIME type.")},
    )
    def retrieve(self, request, name=None, **kwargs):
        scope = self.scope()
        try:
            opened = artifacts.open(*scope, name, _version_param(request))
        except ArtifactNotFound as exc:
            raise NotFound(str(exc)) from exc
        except ArtifactError as exc:
            raise Unprocessable(str(exc), field="name") from exc
        info = opened.info
        response = file_response(opened.file, info.mime_type)
        response["Content-Disposition"] = content_disposition_header(True, info.name)
        response["X-Artifact-Version"] = str(info.version)
        response["ETag"] = f'"{info.sha256}"'
        return response

    @extend_schema(responses=ArtifactVersionSerializer(many=True))
    @action(detail=True)
    def versions(self, request, name=None, **kwargs):
        scope = self.scope()
        try:
            infos = artifacts.version_infos(*scope, name)
        except ArtifactNotFound as exc:
            raise NotFound(str(exc)) from exc
        except ArtifactError as exc:
            raise Unprocessable(str(exc), field="name") from exc
        page = self.paginate_queryset(infos)
        return self.get_paginated_response(ArtifactVersionSerializer(page, many=True).data)

    @extend_schema(parameters=[OpenApiParameter("version", int)])
    def destroy(self, request, name=None, **kwargs):
        scope = self.scope()
        version = _version_param(request)
        try:
            deleted = artifacts.delete(*scope, name, version)
        except ArtifactError as exc:
            raise Unprocessable(str(exc), field="name") from exc
        if not deleted:
            raise NotFound(f"Artifact {f'version {version} of ' if version else ''}'{name}' "
                           "does not exist.")
        return Response(status=status.HTTP_204_NO_CONTENT)
