"""What LangBot's own E2E suite sends, and LangBot's reply envelope: `{"code": 0, "msg": "ok",
"data": ...}` on success, `{"code": <non-zero>, "msg": <why>}` otherwise."""

from rest_framework import serializers


class Credentials(serializers.Serializer):
    user = serializers.EmailField()
    password = serializers.CharField(max_length=128)


class DebugAction(serializers.Serializer):
    action = serializers.CharField(max_length=64, help_text="`run_agent`")
    timeout = serializers.FloatField(min_value=0.1, max_value=3600, required=False)
    data = serializers.DictField(help_text="`{plugin_author, plugin_name, runner_name, context}`")


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
