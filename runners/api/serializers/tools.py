import copy
import re

from rest_framework import serializers

from runners.api.serializers.catalogue import limit_json_size
from runners.models import McpServer
from runners.models.providers import ENV_NAME, HEADER_NAME
from runners.tools import mcp_servers


class McpToolSerializer(serializers.Serializer):
    """One tool of an MCP server, as it lists it."""

    name = serializers.CharField()
    description = serializers.CharField()
    inputSchema = serializers.JSONField(help_text="The JSON schema of its arguments.")


def _secrets_field(help_text: str) -> serializers.DictField:
    return serializers.DictField(child=serializers.CharField(max_length=4000, allow_blank=True),
                                 write_only=True, required=False, help_text=help_text)


class McpServerSerializer(serializers.ModelSerializer):
    """`env` and `headers` are write-only (stored encrypted): writing one replaces all of its
    entries (`{}` removes them); `env_names` and `header_names` say which are set."""

    args = serializers.ListField(child=serializers.CharField(max_length=2000, allow_blank=True),
                                 required=False, max_length=100)
    env = _secrets_field("stdio: environment variables of its process, name → value.")
    env_names = serializers.SerializerMethodField()
    headers = _secrets_field("streamable-http: HTTP headers of its requests, name → value.")
    header_names = serializers.SerializerMethodField()
    tools = McpToolSerializer(many=True, read_only=True)

    class Meta:
        model = McpServer
        fields = ["id", "name", "transport", "command", "args", "env", "env_names", "url",
                  "headers", "header_names", "enabled", "last_error", "tools",
                  "tools_refreshed_at", "created_at", "updated_at"]
        read_only_fields = ["id", "last_error", "tools_refreshed_at", "created_at",
                            "updated_at"]

    def get_env_names(self, instance) -> list[str]:
        return mcp_servers.env_names(instance)

    def get_header_names(self, instance) -> list[str]:
        return mcp_servers.header_names(instance)

    @staticmethod
    def _names_match(value: dict, pattern: re.Pattern, what: str) -> dict:
        bad = [name for name in value if not pattern.match(name)]
        if bad:
            raise serializers.ValidationError(f"Not a valid {what} name: {', '.join(bad)}.")
        return limit_json_size(value)

    def validate_env(self, value):
        return self._names_match(value, ENV_NAME, "environment variable")

    def validate_headers(self, value):
        return self._names_match(value, HEADER_NAME, "header")

    def validate(self, attrs):
        # The server as it would be after this write: a PATCH may change either side.
        candidate = copy.copy(self.instance) if self.instance is not None else McpServer()
        for key, value in attrs.items():
            if key not in ("env", "headers"):
                setattr(candidate, key, value)
        if errors := candidate.transport_errors():
            raise serializers.ValidationError(errors)
        return attrs

    def _save(self, instance, validated_data):
        env, headers = validated_data.pop("env", None), validated_data.pop("headers", None)
        for field, value in validated_data.items():
            setattr(instance, field, value)
        if env is not None:
            mcp_servers.set_env(instance, env)
        if headers is not None:
            mcp_servers.set_headers(instance, headers)
        instance.save()
        return instance

    def create(self, validated_data):
        return self._save(McpServer(), validated_data)

    def update(self, instance, validated_data):
        return self._save(instance, validated_data)


class McpRefreshSerializer(serializers.Serializer):
    """A refresh: `ok` with the tools the server lists now, or its connection `error`."""

    ok = serializers.BooleanField()
    tools = McpToolSerializer(many=True, required=False)
    error = serializers.CharField(required=False)
