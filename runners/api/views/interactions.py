"""The questions runs ask in a conversation, and their answers.

`GET .../conversations/{id}/interactions` lists them; `POST .../interactions/{interaction_id}`
answers one, once (409 after, 410 once expired, 404 for anyone but the conversation's user),
and starts the run of the agent that asked, answered like a message: the outcome as JSON,
NDJSON frames with `?stream=1`, or 202 at once with `?background=1`.
"""

from asgiref.sync import sync_to_async
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import viewsets
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from langhost.base.async_views import AsyncDispatch
from ledger.models import Interaction
from ledger.selectors import interactions as selectors
from runners.api import streaming
from runners.api.serializers.conversations import MESSAGE_RESULT, MESSAGE_STREAM_FRAME
from runners.api.serializers.interactions import (
    InteractionAnswerSerializer,
    InteractionSerializer,
)
from runners.api.serializers.runs import BackgroundRunSerializer
from runners.api.views.conversations import AgentScopedMixin
from runners.conversations import interactions
from runners.conversations.callers import Caller


class InteractionViewSet(AsyncDispatch, AgentScopedMixin, viewsets.GenericViewSet):
    """Questions the conversation's runs asked, newest first; answer one to go on."""

    lookup_url_kwarg = "interaction_id"
    lookup_value_regex = r"[^/]+"
    serializer_class = InteractionSerializer

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation
            return Interaction.objects.none()
        conversation = self.get_conversation(self.kwargs["conversation_id"])
        return selectors.of_conversation(conversation.conversation_id)

    def list(self, request, **kwargs):
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(InteractionSerializer(page, many=True).data)

    @extend_schema(responses=InteractionSerializer)
    def show(self, request, interaction_id=None, **kwargs):
        """One question (the latest of that id) and its answer, if it has one."""
        interaction = self.get_queryset().filter(interaction_id=interaction_id).first()
        if interaction is None:
            raise NotFound(f"Interaction '{interaction_id}' not found.")
        return Response(InteractionSerializer(interaction).data)

    @extend_schema(request=InteractionAnswerSerializer, parameters=[
        OpenApiParameter("stream", bool, description="NDJSON frames as results arrive"),
        OpenApiParameter("background", bool, description="Answer 202 at once; the run goes "
                                                         "on.")],
        responses={
            (202, "application/json"): BackgroundRunSerializer,
            (201, "application/json"): OpenApiResponse(MESSAGE_RESULT, description=(
                "The run the answer started, once it has ended (as a message's).")),
            (201, "application/x-ndjson"): MESSAGE_STREAM_FRAME,
        })
    async def answer(self, request, interaction_id=None, **kwargs):
        """Answer the question: once, before it expires."""
        answer = InteractionAnswerSerializer(data=request.data)
        await sync_to_async(answer.is_valid)(raise_exception=True)
        data = answer.validated_data
        prepared = await sync_to_async(interactions.prepare_answer)(
            Caller(request.user), agent_id=self.kwargs["agent_id"],
            project_id=self.kwargs["project_id"],
            conversation_id=self.kwargs["conversation_id"], interaction_id=interaction_id,
            token=data.get("token"), action_id=data.get("action_id"), values=data["values"])
        prepared.webhook = data.get("webhook", "")
        if streaming.wants_background(request):
            return await streaming.background_response(prepared)
        stream = streaming.wants_stream(request)
        return await streaming.response(streaming.message_body(prepared, stream), stream,
                                        prepared)
