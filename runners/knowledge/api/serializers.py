from rest_framework import serializers

from runners.catalogue import runner_config
from runners.knowledge import engines
from runners.knowledge.models import KnowledgeBase, KnowledgeDocument
from runners.models import LLMModel


class KnowledgeBaseSerializer(serializers.ModelSerializer):
    embedding_model_id = serializers.PrimaryKeyRelatedField(
        source="embedding_model",
        queryset=LLMModel.objects.filter(model_type=LLMModel.Type.EMBEDDING, is_active=True),
        help_text="An active model of type embedding (`GET /models`).")
    rerank_model_id = serializers.PrimaryKeyRelatedField(
        source="rerank_model", required=False, allow_null=True,
        queryset=LLMModel.objects.filter(model_type=LLMModel.Type.RERANK, is_active=True),
        help_text="Optional: an active model of type rerank that orders the candidates.")
    chunk_size = serializers.IntegerField(min_value=20, max_value=4000, default=300)
    chunk_overlap = serializers.IntegerField(min_value=0, max_value=1000, default=50)
    top_k = serializers.IntegerField(min_value=1, max_value=50, default=5)

    engine = serializers.CharField(
        max_length=257, required=False, allow_blank=True,
        help_text='A plugin whose knowledge engine keeps the base ("author/name", `GET /plugins`: '
                  "`knowledge_engine`); set when the base is made. Empty: LangHost's own.")
    engine_settings = serializers.JSONField(
        required=False, help_text="The engine's creation settings, by its `creation_schema`; "
                                  "secret fields are write-only (kept when not sent again).")
    retrieval_settings = serializers.JSONField(
        required=False, help_text="The engine's retrieval settings, by its `retrieval_schema`.")

    class Meta:
        model = KnowledgeBase
        fields = ["id", "name", "description", "embedding_model_id", "chunk_size",
                  "chunk_overlap", "top_k", "retrieval", "rerank_model_id", "engine",
                  "engine_settings", "retrieval_settings", "dimensions", "created_at",
                  "updated_at"]
        read_only_fields = ["id", "dimensions", "created_at", "updated_at"]

    def to_representation(self, instance):
        data = super().to_representation(instance)
        data["engine_settings"] = runner_config.shown(instance.engine_settings or {})
        data["retrieval_settings"] = runner_config.shown(instance.retrieval_settings or {})
        return data

    def validate_name(self, value):
        project = self.context["view"].get_project()
        taken = KnowledgeBase.objects.filter(project=project, name=value)
        if self.instance is not None:
            taken = taken.exclude(pk=self.instance.pk)
        if taken.exists():
            raise serializers.ValidationError("The project has a knowledge base of that name.")
        return value

    def validate(self, attrs):
        size = attrs.get("chunk_size", getattr(self.instance, "chunk_size", 300))
        overlap = attrs.get("chunk_overlap", getattr(self.instance, "chunk_overlap", 50))
        if overlap >= size:
            raise serializers.ValidationError(
                {"chunk_overlap": ["Must be smaller than chunk_size."]})
        engine = attrs.get("engine", getattr(self.instance, "engine", ""))
        if self.instance is not None and engine != self.instance.engine:
            raise serializers.ValidationError({"engine": [
                "A base's engine is chosen when it is made; make a new base for another."]})
        if engine:
            try:
                attrs["engine_settings"], attrs["retrieval_settings"] = engines.checked_settings(
                    engine, attrs.get("engine_settings",
                                      getattr(self.instance, "engine_settings", {})),
                    attrs.get("retrieval_settings",
                              getattr(self.instance, "retrieval_settings", {})), self.instance)
            except ValueError as exc:
                raise serializers.ValidationError(exc.args[0]) from None
        elif attrs.get("engine_settings") or attrs.get("retrieval_settings"):
            raise serializers.ValidationError({"engine": [
                "Settings are an engine's: name the engine they are for."]})
        model = attrs.get("embedding_model")
        if (self.instance is not None and model is not None and self.instance.dimensions
                and model != self.instance.embedding_model):
            raise serializers.ValidationError({"embedding_model_id": [
                "The knowledge base holds vectors of its model already; make a new one."]})
        return attrs


class KnowledgeDocumentSerializer(serializers.ModelSerializer):
    class Meta:
        model = KnowledgeDocument
        fields = ["id", "name", "mime_type", "size", "sha256", "status", "status_reason",
                  "progress", "chunk_count", "created_at", "updated_at"]
        read_only_fields = fields


class DocumentUploadSerializer(serializers.Serializer):
    file = serializers.ListField(child=serializers.FileField(), min_length=1, max_length=20,
                                 help_text="One or more files (multipart, each as `file`).")


class RetrieveSerializer(serializers.Serializer):
    query = serializers.CharField(max_length=4000)
    top_k = serializers.IntegerField(min_value=1, max_value=50, required=False)


class HitSerializer(serializers.Serializer):
    text = serializers.CharField()
    score = serializers.FloatField(
        help_text="What ordered the hit: the rerank model's relevance where the base has one, "
                  "else 1 - cosine distance. Higher is better.")
    distance = serializers.FloatField(help_text="Cosine distance to the query: lower is nearer.")
    citation = serializers.DictField(help_text="{document_id, document, chunk, score, page?}")
