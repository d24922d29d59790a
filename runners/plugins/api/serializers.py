from rest_framework import serializers

from runners.models import CommandDescriptor, PluginInstallation, RunnerDescriptor


class PluginSerializer(serializers.ModelSerializer):
    """A plugin installation; its config (which may hold secrets) is set in the admin only."""

    plugin_id = serializers.CharField(read_only=True)
    runners = serializers.SerializerMethodField(
        help_text="The ids of the runners the runtime listed for it (`GET /runners/{id}`).")
    commands = serializers.SerializerMethodField(
        help_text="The names of its commands: a message starting with an agent type's command "
                  "prefix and one of them runs it (`!name ...`).")

    pages = serializers.JSONField(
        read_only=True, help_text="Its pages (`[{id, label, path}]`), opened in the admin on its "
                                  "installation by whoever may change it.")

    knowledge_engine = serializers.JSONField(
        read_only=True, help_text="Its knowledge engine (`{name, label, description, "
                                  "capabilities, creation_schema, retrieval_schema}`), which a "
                                  "knowledge base may be kept by (`engine`); null: none.")

    class Meta:
        model = PluginInstallation
        fields = ["id", "plugin_id", "author", "name", "version", "enabled", "status",
                  "last_error", "runners", "commands", "listens_to_events", "pages",
                  "knowledge_engine", "created_at", "updated_at"]
        read_only_fields = [name for name in fields if name != "enabled"]

    def get_runners(self, installation) -> list[str]:
        return list(RunnerDescriptor.objects.filter(
            plugin_author=installation.author, plugin_name=installation.name,
            available=True).order_by("id").values_list("id", flat=True))

    def get_commands(self, installation) -> list[str]:
        if not installation.enabled:  # a disabled plugin's commands do not run
            return []
        return list(CommandDescriptor.objects.filter(
            plugin_author=installation.author, plugin_name=installation.name,
            available=True).order_by("name").values_list("name", flat=True))


class PluginUploadSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="A LangBot plugin package (.lbpkg) or a zip of the "
                                           "plugin folder, manifest.yaml at its root.")
