from rest_framework import serializers

from ledger.models import Interaction
from runners.api.serializers.runs import WebhookField


class InteractionSerializer(serializers.ModelSerializer):
    """A question a run asked in the conversation (its token is never shown)."""

    request = serializers.JSONField(source="request_json",
                                    help_text="LangBot's InteractionRequest: kind, title, "
                                              "fields, actions, fallback_text.")
    submission = serializers.JSONField(source="submission_json", allow_null=True)

    class Meta:
        model = Interaction
        fields = ["interaction_id", "run_id", "agent_name", "kind", "title", "status",
                  "expires_at", "request", "submission", "submitted_at", "resume_run_id",
                  "created_at"]


class InteractionAnswerSerializer(serializers.Serializer):
    token = serializers.CharField(max_length=200, required=False, help_text=(
        "The one-time token of the `interaction.requested` frame; the conversation's own "
        "signed-in user may answer without it."))
    action_id = serializers.CharField(max_length=128, required=False, allow_null=True)
    values = serializers.DictField(required=False, default=dict,
                                   help_text="`{field id: value}` for the question's fields.")
    webhook = WebhookField()
