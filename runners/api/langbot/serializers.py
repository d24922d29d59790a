"""What LangBot's own E2E suite sends, and LangBot's reply envelope: `{"code": 0, "msg": "ok",
"data": ...}` on success, `{"code": <non-zero>, "msg": <why>}` otherwise."""

from rest_framework import serializers


class Credentials(serializers.Serializer):
    """LangBot signs in by user name: any name (an e-mail is one), as LangHost's account."""

    user = serializers.CharField(max_length=254)
    password = serializers.CharField(max_length=128)


class FirstAdmin(Credentials):
    setup_token = serializers.CharField(
        max_length=256, required=False,
        help_text="The one-time token `manage.py serve` printed; not needed from this machine "
                  "(unless LANGHOST_SECURE).")


class DebugAction(serializers.Serializer):
    action = serializers.CharField(max_length=64, help_text="`run_agent`")
    timeout = serializers.FloatField(min_value=0.1, max_value=3600, required=False)
    data = serializers.DictField(help_text="`{plugin_author, plugin_name, runner_name, context}`")


class RunAgentContext(serializers.Serializer):
    """The parts of LangBot's runner context the debug action reads: each an object."""

    event = serializers.DictField(required=False, default=dict)
    conversation = serializers.DictField(required=False, default=dict)
    input = serializers.DictField(required=False, default=dict)
    config = serializers.DictField(required=False, default=dict)

    def validate_input(self, value):
        if not isinstance(value.get("text", ""), str | None):
            raise serializers.ValidationError("input.text must be a string.")
        return value

    def validate_event(self, value):
        return _strings_within(value, "event", {"event_id": 255, "event_type": 128})

    def validate_conversation(self, value):
        return _strings_within(value, "conversation", {"conversation_id": 255})


def _strings_within(value: dict, name: str, limits: dict[str, int]) -> dict:
    """`value` if each of `limits`' keys it has is a string within its length (what the run's
    event keeps of it)."""
    for key, limit in limits.items():
        item = value.get(key)
        if item is not None and (not isinstance(item, str) or len(item) > limit):
            raise serializers.ValidationError(f"{name}.{key} must be a string of at most "
                                              f"{limit} characters.")
    return value


class RunAgentData(serializers.Serializer):
    """`data` of the `run_agent` debug action."""

    plugin_author = serializers.CharField(max_length=128)
    plugin_name = serializers.CharField(max_length=128)
    runner_name = serializers.CharField(max_length=128)
    context = RunAgentContext(required=False)


class LangBotReplySerializer(serializers.Serializer):
    code = serializers.IntegerField(help_text="0 on success.")
    msg = serializers.CharField()


class TokenSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="An access token (`Authorization: Bearer ...`).")


class UserAuthReplySerializer(LangBotReplySerializer):
    data = TokenSerializer(required=False)


class PipelineMetadataReplySerializer(LangBotReplySerializer):
    data = serializers.DictField(help_text="`{configs: [...]}`: the `ai` group's `runner` stage "
                                           "lists the available runners.")


class DebugActionReplySerializer(LangBotReplySerializer):
    data = serializers.DictField(required=False, help_text="The runner's `message.completed` "
                                 "result; `{run_id, status}` when the run ended without one.")
