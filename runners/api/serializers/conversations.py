"""Conversations with an agent instance and their messages: what callers send, and what the
API answers (a conversation, its entries and state; a message's outcome or NDJSON frames)."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
from rest_framework import serializers

from ledger.models import Transcript
from runners.api.serializers.runs import (
    MultitaskStrategyField,
    RunMessageSerializer,
    WebhookField,
)

CONVERSATION_ID_RE = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
MAX_ATTACHMENTS = 20


# --- requests -------------------------------------------------------------------------------

class CreateConversationSerializer(serializers.Serializer):
    conversation_id = serializers.RegexField(CONVERSATION_ID_RE, required=False, error_messages={
        "invalid": "Use 1-128 letters, digits, '.', '_', ':' or '-', starting with a letter "
                   "or digit."})
    title = serializers.CharField(max_length=200, required=False, allow_blank=True)
    state = serializers.DictField(required=False)


class UpdateConversationSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=200, required=False, allow_blank=True)
    state = serializers.DictField(required=False, help_text="A `null` value deletes the key.")


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
    webhook = WebhookField()
    multitask_strategy = MultitaskStrategyField()


class ForkSerializer(serializers.Serializer):
    entry_id = serializers.IntegerField(
        help_text="The entry (`GET .../messages`: `id`) the fork starts as of, included.")
    title = serializers.CharField(max_length=200, required=False, allow_blank=True)


class RerunSerializer(serializers.Serializer):
    entry_id = serializers.IntegerField(
        help_text="A user message to answer again, or an agent's reply to produce again.")
    text = serializers.CharField(
        max_length=20_000, required=False, trim_whitespace=False,
        help_text="The message's text, edited (default: as it was sent).")


# --- conversations --------------------------------------------------------------------------

class EntrySerializer(serializers.ModelSerializer):
    """One transcript entry: a user message or an agent's reply."""

    run_id = serializers.SerializerMethodField()
    attachments = serializers.ListField(child=serializers.DictField(), source="attachment_refs")

    class Meta:
        model = Transcript
        fields = ["id", "event_id", "run_id", "role", "author", "content", "content_json",
                  "attachments", "created_at"]

    def get_run_id(self, entry) -> str | None:
        return entry.run_id or None


class ConversationSerializer(serializers.Serializer):
    """A conversation as its owner knows it: `id` is the owner's own id for it."""

    id = serializers.CharField(source="client_id")
    project_id = serializers.CharField()
    agent_id = serializers.CharField()
    title = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class ConversationStateSerializer(ConversationSerializer):
    """A conversation with the state its runs see: `app:` and `user:` keys with their prefix,
    its own keys bare."""

    state = serializers.SerializerMethodField()  # given as context["state"]

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_state(self, conversation):
        return self.context["state"]


class ConversationDetailSerializer(ConversationStateSerializer):
    """A conversation with its state and its recent entries, oldest first."""

    entries = serializers.SerializerMethodField()  # given as context["entries"]

    @extend_schema_field(EntrySerializer(many=True))
    def get_entries(self, conversation):
        return EntrySerializer(self.context["entries"], many=True).data


# --- what sending a message answers ---------------------------------------------------------

class CitationSerializer(serializers.Serializer):
    document_id = serializers.CharField()
    document = serializers.CharField(help_text="The document's name.")
    chunk = serializers.IntegerField(help_text="The chunk's position in the document.")
    page = serializers.IntegerField(required=False, help_text="Its page, in a PDF.")
    score = serializers.FloatField()


class ReplySerializer(serializers.Serializer):
    role = serializers.CharField()
    content = serializers.JSONField(allow_null=True,
                                    help_text="Text, or a list of content parts.")
    citations = CitationSerializer(
        many=True, required=False,
        help_text="The knowledge-base passages the reply was written from, numbered as it "
                  "cites them ([1] is the first); absent when there are none.")


class MessageOutcomeSerializer(serializers.Serializer):
    """How the message's run ended and what the answering agent replied."""

    run_id = serializers.CharField(allow_null=True)
    agent = serializers.CharField(help_text="The agent of the tree that answered.")
    status = serializers.CharField(allow_null=True, help_text="The run's status, `steered` "
                                   "when the message was absorbed into an active run.")
    status_reason = serializers.CharField(allow_blank=True)
    reply = ReplySerializer(allow_null=True)
    usage = serializers.JSONField(allow_null=True)
    conversation_id = serializers.CharField(allow_null=True)
    event_id = serializers.CharField()


class MessageRefusedSerializer(serializers.Serializer):
    """The run could not start: 409 when the conversation is busy and the strategy is
    `reject`, else 503 (in a stream, a frame: the status is 201 already)."""

    type = serializers.CharField(help_text="`run.refused`")
    agent = serializers.CharField()
    detail = serializers.CharField()
    active_run_id = serializers.CharField(required=False,
                                          help_text="The conversation's active run (409).")


class MessageStartedFrameSerializer(serializers.Serializer):
    type = serializers.CharField(help_text="`run.started`")
    run_id = serializers.CharField()
    agent = serializers.CharField()
    event_id = serializers.CharField()


class MessageFinishedFrameSerializer(MessageOutcomeSerializer):
    type = serializers.CharField(help_text="`run.finished`")


MESSAGE_RESULT = PolymorphicProxySerializer(
    component_name="MessageResult",
    serializers=[MessageOutcomeSerializer, MessageRefusedSerializer],
    resource_type_field_name=None,
)

MESSAGE_STREAM_FRAME = PolymorphicProxySerializer(
    component_name="MessageStreamFrame",
    serializers=[MessageStartedFrameSerializer, RunMessageSerializer,
                 MessageFinishedFrameSerializer, MessageRefusedSerializer],
    resource_type_field_name=None,
)
