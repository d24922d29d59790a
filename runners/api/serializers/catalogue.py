import json

from rest_framework import serializers

from runners.catalogue import runner_config, services
from runners.knowledge.models import KnowledgeBase
from runners.models import AgentInstance, AgentType, LLMModel
from runners.plugins.registry import runner_availability
from runners.providers.lookup import model_names, unknown_models
from runners.skills.models import Skill
from runners.webhooks import services as webhooks


class StringListField(serializers.ListField):
    child = serializers.CharField(max_length=500)


MAX_JSON_FIELD_BYTES = 64 * 1024


def limit_json_size(value):
    """Free-form JSON fields are bounded too: an oversize object is a 400, not a stored blob."""
    if len(json.dumps(value)) > MAX_JSON_FIELD_BYTES:
        raise serializers.ValidationError(
            f"Ensure this value is at most {MAX_JSON_FIELD_BYTES // 1024} KB as JSON."
        )
    return value


class AgentTypeSerializer(serializers.ModelSerializer):
    """`sub_agents` is the ordered list of child agent type ids; writing it replaces the list.

    Every write is checked against each agent tree it changes (no cycle, no type under two
    parents, names unique within a tree); a violation is a 400 naming `sub_agents` or `name`.
    """

    expertise = StringListField(required=False, max_length=100)
    fallback_models = StringListField(required=False, max_length=20)
    model_params = serializers.DictField(required=False)
    mcp_servers = serializers.ListField(required=False, max_length=50)
    tools_requiring_approval = StringListField(
        required=False, max_length=100,
        help_text="Tools the built-in LLM agent runs only once the user approved the call.")
    skills = serializers.ListField(
        child=serializers.CharField(max_length=100), required=False, max_length=50,
        help_text="Names of installed skills (`GET /skills`) its agents may activate.")
    knowledge_bases = serializers.ListField(
        child=serializers.UUIDField(), required=False, max_length=50,
        help_text="Ids of knowledge bases (`GET /projects/{id}/knowledge-bases`) its agents "
                  "search; an agent is granted only those of its own project.")
    event_plugins = serializers.ListField(
        child=serializers.CharField(max_length=257), required=False, allow_null=True,
        max_length=50,
        help_text='Plugins ("author/name", `GET /plugins`) whose event listeners see its '
                  "agents' messages, prompts and replies, in this order; [] for none; null (the "
                  "default) for every enabled plugin that listens, by priority.")
    output_schema = serializers.JSONField(
        required=False, allow_null=True, validators=[limit_json_size],
        help_text="A JSON Schema its reply must match (the built-in LLM agent asks its model "
                  "for it, asks once more on a mismatch, else fails the run output.invalid); "
                  "null for free text.")
    runner_config = serializers.JSONField(
        required=False, validators=[limit_json_size],
        help_text="Values for the runner's own config fields (`GET /runners/{id}`: "
                  "`config_schema`), in LangBot's shapes; checked against the schema, a key it "
                  "does not declare is refused. They win over what primary_model, "
                  "fallback_models, personality_prompt and mcp_servers fill in. Secret fields "
                  "are write-only: never shown (see runner_config_secrets), kept when not sent "
                  "again, cleared with null.")
    runner_config_secrets = serializers.SerializerMethodField(
        help_text="The secret config fields that hold a value (write-only: never shown).")
    sub_agents = serializers.ListField(child=serializers.UUIDField(), required=False,
                                       max_length=100)
    unknown_models = serializers.SerializerMethodField(
        help_text="Model names (primary, fallbacks) no registered model has: accepted, flagged.")
    warnings = serializers.SerializerMethodField(
        help_text="What was accepted but needs attention, e.g. a runner not available now.")

    class Meta:
        model = AgentType
        fields = [
            "id", "name", "slug", "description", "expertise", "personality_prompt",
            "primary_model", "fallback_models", "model_params", "mcp_servers",
            "tools_requiring_approval", "knowledge_bases",
            "knowledge_retrieval", "skills", "box_enabled", "box_network", "webhook_url",
            "multitask_strategy",
            "is_active",
            "runner_id", "kind", "disallow_transfer_to_parent", "disallow_transfer_to_peers",
            "save_input_blobs_as_artifacts", "command_prefix", "event_plugins", "output_key",
            "max_iterations", "continue_on_step_failure", "output_schema", "guardrails",
            "agent_tools", "runner_config",
            "runner_config_secrets",
            "sub_agents", "unknown_models", "warnings",
            "created_at", "updated_at",
        ]
        read_only_fields = ["id", "created_at", "updated_at"]

    def to_representation(self, instance):
        data = super().to_representation(instance)
        data["runner_config"] = runner_config.shown(instance.runner_config or {})
        data["sub_agents"] = [str(link.child_id) for link in instance.sub_agent_links.all()]
        return data

    def get_unknown_models(self, instance) -> list[str]:
        # One query per request: a list's items share the context.
        if "known_models" not in self.context:
            self.context["known_models"] = set(LLMModel.objects.values_list("name", flat=True))
        return unknown_models(model_names(instance), self.context["known_models"])

    def get_runner_config_secrets(self, instance) -> list[str]:
        return runner_config.secrets_set(instance.runner_config or {})

    def get_warnings(self, instance) -> list[str]:
        warnings = []
        if runner_availability(instance.runner_id) is False:
            warnings.append(f"Runner '{instance.runner_id}' is known but not available now: "
                            "runs of this type are refused until its plugin is back.")
        return warnings

    def validate_runner_id(self, value):
        if runner_availability(value) is None:
            raise serializers.ValidationError(
                f"Unknown runner '{value}': choose one of GET /api/v1/runners.")
        return value

    def validate_model_params(self, value):
        return limit_json_size(value)

    def validate_mcp_servers(self, value):
        return limit_json_size(value)

    def validate_knowledge_bases(self, value):
        ids = list(dict.fromkeys(str(pk) for pk in value))
        known = {str(pk) for pk in KnowledgeBase.objects.filter(pk__in=ids)
                 .values_list("pk", flat=True)}
        unknown = [pk for pk in ids if pk not in known]
        if unknown:
            raise serializers.ValidationError(
                f"Unknown knowledge base id(s): {', '.join(unknown)}.")
        return ids

    def validate_webhook_url(self, value):
        try:
            return webhooks.check_url(value) if value else ""
        except webhooks.WebhookError as exc:
            raise serializers.ValidationError(str(exc)) from None

    def validate_skills(self, value):
        names = list(dict.fromkeys(value))
        known = set(Skill.objects.filter(name__in=names).values_list("name", flat=True))
        unknown = [name for name in names if name not in known]
        if unknown:
            raise serializers.ValidationError(f"Unknown skill(s): {', '.join(unknown)}.")
        return names

    def validate_sub_agents(self, value):
        if len(set(value)) != len(value):
            raise serializers.ValidationError("An agent type is listed twice.")
        known = set(AgentType.objects.filter(pk__in=value).values_list("pk", flat=True))
        unknown = [str(pk) for pk in value if pk not in known]
        if unknown:
            raise serializers.ValidationError(f"Unknown agent type id(s): {', '.join(unknown)}.")
        return value

    def validate(self, attrs):
        sub_agents = attrs.pop("sub_agents", None)
        try:
            attrs = services.prepare_agent_type(self.instance, attrs, sub_agents)
        except services.CatalogueError as exc:
            raise serializers.ValidationError(exc.errors) from exc
        if sub_agents is not None:
            attrs["sub_agents"] = sub_agents
        return attrs

    def create(self, validated_data):
        sub_agents = validated_data.pop("sub_agents", None)
        return services.save_agent_type(None, validated_data, sub_agents)

    def update(self, instance, validated_data):
        sub_agents = validated_data.pop("sub_agents", None)
        return services.save_agent_type(instance, validated_data, sub_agents)


class AgentInstanceSerializer(serializers.ModelSerializer):
    project_id = serializers.UUIDField(read_only=True)
    agent_type_id = serializers.UUIDField(read_only=True)
    agent_type_slug = serializers.CharField(source="agent_type.slug", read_only=True)

    class Meta:
        model = AgentInstance
        fields = [
            "id", "name", "status", "project_id", "agent_type_id", "agent_type_slug",
            "created_at", "updated_at",
        ]
        read_only_fields = ["id", "status", "created_at", "updated_at"]


class SpawnAgentSerializer(serializers.Serializer):
    agent_type_id = serializers.UUIDField(error_messages={
        "invalid": "'{value}' is not an agent type's id: GET /agent-types lists them, "
                   "GET /agent-types/slug/<slug> finds one by its slug."})
    project_id = serializers.UUIDField(required=False)
    name = serializers.CharField(max_length=200)


class TerminatedAgentSerializer(serializers.Serializer):
    message = serializers.CharField()
    id = serializers.UUIDField()


class AgentMetricsSerializer(serializers.Serializer):
    total_instances = serializers.IntegerField()
    active_instances = serializers.IntegerField()
    idle_instances = serializers.IntegerField()
    total_tasks_completed = serializers.IntegerField()
    total_tokens_used = serializers.IntegerField()
    total_cost_incurred = serializers.FloatField()
