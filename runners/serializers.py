from rest_framework import serializers

from .models import AgentInstance, AgentType


class StringListField(serializers.ListField):
    child = serializers.CharField(max_length=500)


class AgentTypeSerializer(serializers.ModelSerializer):
    expertise = StringListField(required=False, max_length=100)
    fallback_models = StringListField(required=False, max_length=20)
    model_params = serializers.DictField(required=False)
    mcp_servers = serializers.ListField(required=False, max_length=50)

    class Meta:
        model = AgentType
        fields = [
            "id", "name", "slug", "description", "expertise", "personality_prompt",
            "primary_model", "fallback_models", "model_params", "mcp_servers", "is_active",
            "runner_id", "created_at", "updated_at",
        ]
        read_only_fields = ["id", "created_at", "updated_at"]


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
    agent_type_id = serializers.UUIDField()
    project_id = serializers.UUIDField(required=False)
    name = serializers.CharField(max_length=200)


class AgentMetricsSerializer(serializers.Serializer):
    total_instances = serializers.IntegerField()
    active_instances = serializers.IntegerField()
    idle_instances = serializers.IntegerField()
    total_tasks_completed = serializers.IntegerField()
    total_tokens_used = serializers.IntegerField()
    total_cost_incurred = serializers.FloatField()
