from rest_framework import serializers

from runners.api.serializers.catalogue import limit_json_size
from runners.models import LLMModel, ModelProvider
from runners.models.providers import HEADER_NAME
from runners.providers.prices import PRICE_FIELDS, prefill
from runners.providers.secrets import extra_header_names, set_api_key, set_extra_headers

ABILITIES = ["tools", "vision", "streaming", "reasoning"]


class ModelProviderSerializer(serializers.ModelSerializer):
    """`api_key` is write-only (stored encrypted; `""` removes it); `has_api_key` says whether
    the provider has one, stored or from `api_key_env` (a variable whose name starts with
    `LANGHOST_PROVIDER_KEY_ENV_PREFIX`). `extra_headers` are write-only too: writing them
    replaces all of them (`{}` removes them); `extra_header_names` says which are set."""

    api_key = serializers.CharField(write_only=True, required=False, allow_blank=True,
                                    max_length=1000, trim_whitespace=True,
                                    style={"input_type": "password"})
    has_api_key = serializers.BooleanField(read_only=True)
    timeout = serializers.FloatField(required=False, min_value=0.1, max_value=3600)
    extra_headers = serializers.DictField(child=serializers.CharField(max_length=2000),
                                          required=False, write_only=True)
    extra_header_names = serializers.SerializerMethodField()

    class Meta:
        model = ModelProvider
        fields = ["id", "name", "kind", "base_url", "api_key", "api_key_env", "has_api_key",
                  "timeout", "extra_headers", "extra_header_names", "created_at", "updated_at"]
        read_only_fields = ["id", "created_at", "updated_at"]

    def get_extra_header_names(self, instance) -> list[str]:
        return extra_header_names(instance)

    def validate_extra_headers(self, value):
        bad = [name for name in value if not HEADER_NAME.match(name)]
        if bad:
            raise serializers.ValidationError(f"Not a valid header name: {', '.join(bad)}.")
        return limit_json_size(value)

    def _save(self, instance, validated_data):
        api_key = validated_data.pop("api_key", None)
        headers = validated_data.pop("extra_headers", None)
        for field, value in validated_data.items():
            setattr(instance, field, value)
        if api_key is not None:
            set_api_key(instance, api_key)
        if headers is not None:
            set_extra_headers(instance, headers)
        instance.save()
        return instance

    def create(self, validated_data):
        return self._save(ModelProvider(), validated_data)

    def update(self, instance, validated_data):
        return self._save(instance, validated_data)


class LLMModelSerializer(serializers.ModelSerializer):
    """Created without prices, a model takes genai-prices' prices for its `upstream_model`
    when that catalogue knows it."""

    provider_id = serializers.PrimaryKeyRelatedField(source="provider",
                                                     queryset=ModelProvider.objects.all())
    provider_name = serializers.CharField(source="provider.name", read_only=True)
    abilities = serializers.ListField(child=serializers.ChoiceField(ABILITIES), required=False,
                                      max_length=len(ABILITIES))
    context_window = serializers.IntegerField(required=False, min_value=1, max_value=100_000_000)
    input_price_per_mtok = serializers.DecimalField(
        max_digits=12, decimal_places=6, min_value=0, required=False, coerce_to_string=False)
    output_price_per_mtok = serializers.DecimalField(
        max_digits=12, decimal_places=6, min_value=0, required=False, coerce_to_string=False)
    cached_price_per_mtok = serializers.DecimalField(
        max_digits=12, decimal_places=6, min_value=0, required=False, coerce_to_string=False)

    class Meta:
        model = LLMModel
        fields = ["id", "name", "provider_id", "provider_name", "upstream_model", "model_type",
                  "abilities", "context_window", "input_price_per_mtok", "output_price_per_mtok",
                  "cached_price_per_mtok", "is_active", "created_at", "updated_at"]
        read_only_fields = ["id", "created_at", "updated_at"]

    def validate_abilities(self, value):
        return list(dict.fromkeys(value))

    def create(self, validated_data):
        model = LLMModel(**validated_data)
        prefill(model, prices=not any(field in validated_data for field in PRICE_FIELDS),
                window="context_window" not in validated_data)
        model.save()
        return model


class ModelProbeSerializer(serializers.Serializer):
    """A one-token test call: `latency_ms` when it answered, else the provider's `error`."""

    ok = serializers.BooleanField()
    latency_ms = serializers.IntegerField(required=False)
    error = serializers.CharField(required=False)


class UpstreamModelSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="The provider's id for it (`upstream_model`).")
    name = serializers.CharField()
    context_window = serializers.IntegerField(allow_null=True)
    imported = serializers.BooleanField(help_text="An LLM model of it exists.")


class UpstreamModelListSerializer(serializers.Serializer):
    data = UpstreamModelSerializer(many=True)


class ImportModelsSerializer(serializers.Serializer):
    ids = serializers.ListField(child=serializers.CharField(max_length=200), required=False,
                                max_length=500, help_text="Upstream ids to import (default: all).")


class ImportedModelsSerializer(serializers.Serializer):
    created = serializers.ListField(child=serializers.CharField(), help_text="New models' names.")
    skipped = serializers.ListField(child=serializers.CharField(),
                                    help_text="Ids imported before, or not listed.")
