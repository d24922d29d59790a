from rest_framework import serializers

from runners.models import ToolDescriptor


class ToolSerializer(serializers.ModelSerializer):
    plugin = serializers.CharField(source="plugin_identity", read_only=True,
                                   help_text="`author/name` of the plugin that provides it")

    class Meta:
        model = ToolDescriptor
        fields = ["id", "name", "plugin", "plugin_author", "plugin_name", "label", "description",
                  "parameters", "available", "last_seen_at"]
