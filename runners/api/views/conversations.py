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

A conversation belongs to the user who opened it: anyone else gets 404. Messages are validated
(and input files saved) here, on Django's sync side; the run itself happens while the response
body streams, on the event loop (see run_views).
"""

import base64
import binascii
import re
import uuid
from urllib.parse import quote

from django.http import HttpResponse, StreamingHttpResponse
from django.utils.dateparse import parse_datetime
from django.utils.http import content_disposition_header
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, NotFound
from rest_framework.response import Response

from accounts.models import Project
from langhost.api import Conflict, Gone, Unprocessable
from ledger.models import Artifact, Conversation
from ledger.selectors.runs import clamp_limit
from ledger.services import conversations
from ledger.services.artifacts import (
    ArtifactError,
    ArtifactNotFound,
    ArtifactTooLarge,
    artifacts,
    max_bytes,
)
from runners.catalogue.agent_routing import TreeError
from runners.conversations.services import (
    ArtifactScope,
    InputFileError,
    Part,
    build_input,
    message_body,
    new_invocation_id,
    node_binding,
    route,
    state_identity,
)
from runners.execution import registry
from runners.execution.agents import user_event
from runners.execution.orchestrator import new_run_id
from runners.models import AgentInstance
from runners.plugins.gateway import require_runner_sync

CONVERSATION_ID_RE = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
DEFAULT_ENTRY_LIMIT = 20
MAX_ATTACHMENTS = 20


class PayloadTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request is too large."
    default_code = "too_large"


class RunnerUnavailable(APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "runner_unavailable"


class InputFileSaveFailed(APIException):
    status_code = status.HTTP_500_INTERNAL_SERVER_ERROR
    default_code = "artifact_save_failed"


# --- serializers --------------------------------------------------------------------------

class CreateConversationSerializer(serializers.Serializer):
    conversation_id = serializers.RegexField(CONVERSATION_ID_RE, required=False, error_messages={
        "invalid": "Use 1-128 letters, digits, '.', '_', ':' or '-', starting with a letter "
                   "or digit."})
    title = serializers.CharField(max_length=200, required=False, allow_blank=True)
    state = serializers.DictField(required=False)


class UpdateConversationSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=200, required=False, allow_blank=True)
    state = serializers.DictField(required=False)


class AttachmentSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=255, required=False, allow_blank=True)
    mime_type = serializers.CharField(max_length=255, required=False, allow_blank=True)
    data = serializers.CharField(required=False, trim_whitespace=False,
                                 help_text="The file's bytes, base64 (or a base64 data URL).")
    url = serializers.URLField(max_length=2000, required=False)

    def validate(self, attrs):
        if ("data" in attrs) == ("url" in attrs):
            raise serializers.ValidationError("Give exactly one of data (base64) or url.")
        return attrs


class MessageSerializer(serializers.Serializer):
    text = serializers.CharField(max_length=20_000, required=False, allow_blank=True,
                                 trim_whitespace=False)
    attachments = AttachmentSerializer(many=True, required=False, max_length=MAX_ATTACHMENTS)


class ArtifactUploadSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=255, required=False)
    mime_type = serializers.CharField(max_length=255, required=False)
    file = serializers.FileField(required=False)
    data = serializers.CharField(required=False, trim_whitespace=False)
    text = serializers.CharField(required=False, trim_whitespace=False, allow_blank=True)


def conversation_dict(conversation, *, state=None, entries=None) -> dict:
    data = {"id": conversation.conversation_id, "project_id": conversation.project_id,
            "agent_id": conversation.agent_id, "title": conversation.title,
            "created_at": conversation.created_at, "updated_at": conversation.updated_at}
    if state is not None:
        data["state"] = state
    if entries is not None:
        data["entries"] = [entry_dict(entry) for entry in entries]
    return data


def entry_dict(entry) -> dict:
    return {"id": entry.pk, "event_id": entry.event_id, "run_id": entry.run_id or None,
            "role": entry.role, "author": entry.author, "content": entry.content,
            "content_json": entry.content_json, "attachments": entry.attachment_refs,
            "created_at": entry.created_at}


# --- helpers ------------------------------------------------------------------------------

def _decode_base64(value: str, field: str) -> tuple[bytes, str | None]:
    """Bytes of a base64 string or data URL (and the data URL's MIME type); 413 when the
    decoded size would pass the artifact limit, 422 when it is not base64."""
    mime = None
    match = re.match(r"^data:([^;,]*)(;[^,]*)?,", value[:300])
    if match:
        mime, value = match.group(1) or None, value[match.end():]
    limit = max_bytes()
    if len(value) // 4 * 3 - 2 > limit:
        raise PayloadTooLarge(f"{field} is larger than the {limit}-byte limit for a file "
                              "(LANGHOST_ARTIFACT_MAX_BYTES).")
    try:
        data = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise Unprocessable(f"{field} is not valid base64.", field="attachments") from None
    if len(data) > limit:
        raise PayloadTooLarge(f"{field} is {len(data)} bytes, over the {limit}-byte limit for a "
                              "file (LANGHOST_ARTIFACT_MAX_BYTES).")
    return data, mime


def _version_param(request) -> int | None:
    raw = request.query_params.get("version")
    if raw in (None, ""):
        return None
    try:
        version = int(raw)
    except ValueError:
        version = 0
    if version < 1:
        raise Unprocessable("version must be a positive integer.", field="version")
    return version


def _require_runner(runner_id: str) -> None:
    try:
        require_runner_sync(runner_id)
    except registry.RunnerNotFound as exc:
        raise RunnerUnavailable(f"{exc} The agent cannot answer until it is.") from exc


def prepare_message(*, user, agent: AgentInstance, conversation, data, conversation_url: str):
    """Everything before a message runs, for the REST endpoint and the WebSocket alike: the
    agent takes messages (409 paused, 410 terminated), the input is valid (422, 413), the tree
    routes it to an agent whose runner is available (503), input files are saved as artifacts.

    Returns `(event, binding, node)`; raises DRF API exceptions.
    """
    if agent.status == AgentInstance.Status.PAUSED:
        raise Conflict(f"Agent '{agent.name}' is paused; resume it to send messages.")
    if agent.status == AgentInstance.Status.TERMINATED:
        raise Gone(f"Agent '{agent.name}' is terminated; it takes no more messages.")
    parts = message_parts(data)
    try:
        _tree, node = route(agent, conversation.conversation_id)
    except TreeError as exc:
        raise Conflict(f"The agent tree of '{agent.agent_type.name}' is invalid: {exc}") from exc
    binding = node_binding(agent, node)
    _require_runner(binding.runner_id)

    invocation_id = new_invocation_id()
    scope = ArtifactScope(str(agent.project_id), str(user.pk), conversation.conversation_id)

    def url_for(name, version):
        return f"{conversation_url}/artifacts/{quote(name, safe='')}?version={version}"

    try:
        event_input = build_input(
            parts, invocation_id=invocation_id, scope=scope, url_for=url_for,
            save_blobs=agent.agent_type.save_input_blobs_as_artifacts)
    except InputFileError as exc:
        raise InputFileSaveFailed(str(exc)) from exc
    event = user_event(
        user, event_id=invocation_id, conversation_id=conversation.conversation_id,
        project_id=str(agent.project_id), agent_id=str(agent.pk), input=event_input,
        data={"invocation_id": invocation_id, "agent_name": node.name},
    )
    return event, binding, node


def message_parts(data) -> list[Part]:
    """The parts of a message body: its text, then each attachment, in order."""
    body = MessageSerializer(data=data)
    body.is_valid(raise_exception=True)
    text = body.validated_data.get("text") or ""
    attachments = body.validated_data.get("attachments") or []
    if not text.strip() and not attachments:
        raise Unprocessable("A message needs text or at least one attachment.", field="text")
    parts = [Part(text=text)] if text else []
    for index, item in enumerate(attachments):
        name = item.get("name") or ""
        if "url" in item:
            parts.append(Part(url=item["url"], name=name,
                              mime_type=item.get("mime_type") or "application/octet-stream"))
            continue
        data, data_mime = _decode_base64(item["data"], f"attachments[{index}].data")
        parts.append(Part(data=data, name=name, mime_type=item.get("mime_type") or data_mime
                          or "application/octet-stream"))
    return parts


class AgentScopedMixin:
    """The agent instance of the URL (in a project the caller sees) and its conversations."""

    def get_agent(self) -> AgentInstance:
        if not hasattr(self, "_agent"):
            try:
                agent_pk = uuid.UUID(self.kwargs["agent_id"])
            except ValueError:
                raise NotFound("Agent not found.") from None
            visible = Project.objects.visible_to(self.request.user)
            agent = (AgentInstance.objects.select_related("agent_type")
                     .filter(pk=agent_pk, project_id=self.kwargs["project_id"],
                             project__in=visible).first())
            if agent is None:
                raise NotFound("Agent not found.")
            self._agent = agent
        return self._agent

    def get_conversation(self, conversation_id: str):
        agent = self.get_agent()
        conversation = conversations.get(conversation_id, user_id=str(self.request.user.pk),
                                         agent_id=str(agent.pk))
        if conversation is None:
            raise NotFound(f"Conversation '{conversation_id}' not found.")
        return conversation


# --- conversations ------------------------------------------------------------------------

class ConversationViewSet(AgentScopedMixin, viewsets.GenericViewSet):
    """A user's conversations with one agent instance."""

    lookup_url_kwarg = "conversation_id"
    lookup_value_regex = r"[^/]+"
    serializer_class = CreateConversationSerializer

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation
            return Conversation.objects.none()
        return conversations.list_for(agent_id=str(self.get_agent().pk),
                                      user_id=str(self.request.user.pk))

    def list(self, request, **kwargs):
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response([conversation_dict(c) for c in page])

    def create(self, request, **kwargs):
        agent = self.get_agent()
        if agent.status == AgentInstance.Status.TERMINATED:
            raise Gone(f"Agent '{agent.name}' is terminated; it takes no new conversations.")
        body = CreateConversationSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        identity = state_identity(agent)
        try:
            conversation = conversations.create(
                project_id=str(agent.project_id), agent_id=str(agent.pk),
                user_id=str(request.user.pk), conversation_id=data.get("conversation_id"),
                title=data.get("title", ""), state=data.get("state"), identity=identity,
            )
        except conversations.ConversationExists as exc:
            raise Conflict(str(exc)) from exc
        state = conversations.get_state(conversation, identity)
        return Response(conversation_dict(conversation, state=state, entries=[]),
                        status=status.HTTP_201_CREATED)

    @extend_schema(parameters=[
        OpenApiParameter("limit", int, description=f"recent entries (default "
                                                    f"{DEFAULT_ENTRY_LIMIT}, max 100)"),
        OpenApiParameter("after", str, description="only entries created at/after (ISO 8601)"),
    ])
    def retrieve(self, request, conversation_id=None, **kwargs):
        conversation = self.get_conversation(conversation_id)
        raw_limit = request.query_params.get("limit")
        if raw_limit is not None and not raw_limit.isdigit():
            raise Unprocessable("limit must be a positive integer.", field="limit")
        after = None
        if raw_after := request.query_params.get("after"):
            after = parse_datetime(raw_after)
            if after is None:
                raise Unprocessable("after must be an ISO 8601 date-time.", field="after")
        entries = conversations.entries(
            conversation.conversation_id, limit=clamp_limit(raw_limit, DEFAULT_ENTRY_LIMIT),
            after=after)
        state = conversations.get_state(conversation, state_identity(self.get_agent()))
        return Response(conversation_dict(conversation, state=state, entries=entries))

    @extend_schema(request=UpdateConversationSerializer)
    def partial_update(self, request, conversation_id=None, **kwargs):
        conversation = self.get_conversation(conversation_id)
        body = UpdateConversationSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        identity = state_identity(self.get_agent())
        if "title" in body.validated_data:
            conversation.title = body.validated_data["title"]
            conversation.save(update_fields=["title", "updated_at"])
        state = conversations.update_state(conversation, identity,
                                           body.validated_data.get("state") or {})
        return Response(conversation_dict(conversation, state=state))

    def destroy(self, request, conversation_id=None, **kwargs):
        conversation = self.get_conversation(conversation_id)
        conversations.delete(conversation.conversation_id, user_id=str(request.user.pk))
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=MessageSerializer, responses={201: None}, parameters=[
        OpenApiParameter("stream", bool, description="NDJSON frames as results arrive")])
    @action(detail=True, methods=["post"])
    def messages(self, request, conversation_id=None, **kwargs):
        """Send a message; the answering agent of the tree replies (see module doc)."""
        base = request.build_absolute_uri(request.path.rsplit("/messages", 1)[0])
        event, binding, node = prepare_message(
            user=request.user, agent=self.get_agent(),
            conversation=self.get_conversation(conversation_id), data=request.data,
            conversation_url=base)
        stream = request.query_params.get("stream") in {"1", "true", "yes"}
        body = message_body(event=event, binding=binding, run_id=new_run_id(),
                            agent_pk=event.agent_id, agent_name=node.name, stream=stream)
        return StreamingHttpResponse(
            body, status=status.HTTP_201_CREATED,
            content_type="application/x-ndjson" if stream else "application/json")


# --- artifacts ----------------------------------------------------------------------------

class ArtifactViewSet(AgentScopedMixin, viewsets.GenericViewSet):
    """Versioned files of a conversation (and the user's `user:` files)."""

    lookup_url_kwarg = "name"
    lookup_value_regex = r"[^/]+"
    serializer_class = ArtifactUploadSerializer

    def get_queryset(self):  # only for schema generation: artifacts are read through the service
        return Artifact.objects.none()

    def scope(self) -> tuple[str, str, str]:
        conversation = self.get_conversation(self.kwargs["conversation_id"])
        return conversation.project_id, conversation.user_id, conversation.conversation_id

    def list(self, request, **kwargs):
        infos = artifacts.latest_infos(*self.scope())
        page = self.paginate_queryset(infos)
        return self.get_paginated_response([
            {"name": i.name, "latest_version": i.version, "mime_type": i.mime_type,
             "size": i.size, "sha256": i.sha256, "created_at": i.created_at} for i in page])

    def create(self, request, **kwargs):
        scope = self.scope()
        body = ArtifactUploadSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        sources = [key for key in ("file", "data", "text") if key in data]
        if len(sources) != 1:
            raise Unprocessable("Give exactly one of file (multipart), data (base64) or text.",
                                field="file")
        upload = data.get("file")
        name = data.get("name") or (upload.name if upload else "")
        mime_type = data.get("mime_type")
        content, text = None, None
        if upload is not None:
            if upload.size > max_bytes():
                raise PayloadTooLarge(str(ArtifactTooLarge(name, upload.size, max_bytes())))
            content, mime_type = upload.read(), mime_type or upload.content_type
        elif "data" in data:
            content, data_mime = _decode_base64(data["data"], "data")
            mime_type = mime_type or data_mime
        else:
            text = data["text"]
        try:
            version = artifacts.save(*scope, name, data=content, text=text, mime_type=mime_type)
        except ArtifactTooLarge as exc:
            raise PayloadTooLarge(str(exc)) from exc
        except ArtifactError as exc:
            raise Unprocessable(str(exc), field="name") from exc
        info = artifacts.metadata(*scope, name, version)
        return Response(info.as_dict(), status=status.HTTP_201_CREATED)

    @extend_schema(parameters=[OpenApiParameter("version", int)], responses={200: bytes})
    def retrieve(self, request, name=None, **kwargs):
        scope = self.scope()
        try:
            loaded = artifacts.load(*scope, name, _version_param(request))
        except ArtifactNotFound as exc:
            raise NotFound(str(exc)) from exc
        except ArtifactError as exc:
            raise Unprocessable(str(exc), field="name") from exc
        info = loaded.info
        response = HttpResponse(loaded.data, content_type=info.mime_type)
        response["Content-Disposition"] = content_disposition_header(True, info.name)
        response["X-Artifact-Version"] = str(info.version)
        response["ETag"] = f'"{info.sha256}"'
        return response

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
        return self.get_paginated_response([info.as_dict() for info in page])

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
