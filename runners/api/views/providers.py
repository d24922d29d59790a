from asgiref.sync import async_to_sync
from django.db.models import ProtectedError
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from accounts.permissions import IsSuperuser, IsSuperuserOrReadOnly
from langhost.base.api import UUID, Conflict, UpstreamFailed
from langhost.base.schema import ERROR_SCHEMA
from runners.api.serializers import providers as serializers
from runners.models import LLMModel, ModelProvider
from runners.providers import importing, load_calls
from runners.providers.errors import ProviderError

UPSTREAM_FAILED = OpenApiResponse(ERROR_SCHEMA, description=(
    "The provider did not list its models (unreachable, or it refused): its error, in `detail`."))


class ModelProviderViewSet(viewsets.ModelViewSet):
    """Model providers (endpoints and their keys): superusers only, reading included."""

    lookup_value_regex = UUID
    queryset = ModelProvider.objects.all()
    serializer_class = serializers.ModelProviderSerializer
    permission_classes = viewsets.ModelViewSet.permission_classes + [IsSuperuser]
    filterset_fields = ["kind"]
    ordering_fields = ["name", "created_at"]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def _listed(self, provider) -> list[dict]:
        try:
            return async_to_sync(load_calls().upstream_models)(provider)
        except ProviderError as exc:
            raise UpstreamFailed(f"Provider '{provider.name}' did not list its models: "
                                 f"{exc}") from exc

    @extend_schema(responses={200: serializers.UpstreamModelListSerializer, 502: UPSTREAM_FAILED})
    @action(detail=True, url_path="upstream-models")
    def upstream_models(self, request, pk=None):
        """The models the provider's API lists, each marked `imported` when an LLM model of
        it exists (502 with the provider's error when it cannot list them)."""
        provider = self.get_object()
        return Response({"data": importing.with_imported(provider, self._listed(provider))})

    @extend_schema(request=serializers.ImportModelsSerializer,
                   responses={201: serializers.ImportedModelsSerializer, 502: UPSTREAM_FAILED})
    @action(detail=True, methods=["post"], url_path="import-models")
    def import_models(self, request, pk=None):
        """LLM models for the listed upstream models named in `ids` (all when left out):
        priced and sized from genai-prices; those imported before are skipped."""
        provider = self.get_object()
        body = serializers.ImportModelsSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        imported = importing.import_models(provider, self._listed(provider),
                                           body.validated_data.get("ids"))
        return Response(imported, status=status.HTTP_201_CREATED)

    def perform_destroy(self, instance):
        try:
            instance.delete()
        except ProtectedError as exc:
            count = instance.models.count()
            raise Conflict(f"Provider '{instance.name}' still has {count} model(s); "
                           "delete or move them first.") from exc


class LLMModelViewSet(viewsets.ModelViewSet):
    """Models agents name: readable by everyone signed in, written (and tested) by superusers."""

    lookup_value_regex = UUID
    queryset = LLMModel.objects.select_related("provider")
    serializer_class = serializers.LLMModelSerializer
    permission_classes = viewsets.ModelViewSet.permission_classes + [IsSuperuserOrReadOnly]
    filterset_fields = ["provider", "model_type", "is_active"]
    ordering_fields = ["name", "created_at"]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def perform_destroy(self, instance):
        try:
            instance.delete()
        except ProtectedError as exc:
            users = sorted({str(obj) for obj in exc.protected_objects})
            raise Conflict(f"Model '{instance.name}' is used by knowledge base(s) "
                           f"{', '.join(users)}; change or delete them first.") from exc

    @extend_schema(request=None, responses=serializers.ModelProbeSerializer)
    @action(detail=True, methods=["post"])
    def test(self, request, pk=None):
        """A one-token call: 200 either way, `ok` says whether the model answered."""

        return Response(async_to_sync(load_calls().probe)(self.get_object()))
