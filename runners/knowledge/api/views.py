"""A project's knowledge bases, their documents and retrieval. Members of the project
manage its knowledge bases; superusers see every project's; anyone else finds none (404)."""

from asgiref.sync import async_to_sync
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response

from accounts.api.scoping import ProjectScoped
from langhost.base.api import UUID
from runners.api.message_body import PayloadTooLarge
from runners.knowledge import services, worker
from runners.knowledge.api import serializers
from runners.knowledge.models import KnowledgeBase, KnowledgeDocument
from runners.providers.errors import ProviderError


class EmbeddingUnavailable(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "model_unavailable"


class KnowledgeBaseViewSet(ProjectScoped, viewsets.ModelViewSet):
    serializer_class = serializers.KnowledgeBaseSerializer
    lookup_url_kwarg = "knowledge_base_id"
    lookup_value_regex = UUID
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return KnowledgeBase.objects.none()
        return KnowledgeBase.objects.filter(project=self.get_project()).select_related(
            "embedding_model")

    def perform_create(self, serializer):
        services.knowledge_base_created(serializer.save(project=self.get_project()))

    def perform_destroy(self, instance):
        services.delete_knowledge_base(instance)

    @extend_schema(request=serializers.RetrieveSerializer,
                   responses=serializers.HitSerializer(many=True))
    @action(detail=True, methods=["post"], url_path="retrieve")
    def search(self, request, **kwargs):
        """The chunks nearest to `query`, best first, each with its citation: the same
        service runners retrieve through."""
        knowledge_base = self.get_object()
        body = serializers.RetrieveSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            hits = async_to_sync(services.retrieve)(
                knowledge_base, body.validated_data["query"], body.validated_data.get("top_k"))
        except ProviderError as exc:
            raise EmbeddingUnavailable(str(exc)) from None
        return Response([{"text": hit.text, "score": hit.score, "distance": hit.distance,
                          "citation": hit.citation()} for hit in hits])


class KnowledgeDocumentViewSet(ProjectScoped, mixins.ListModelMixin,
                               mixins.RetrieveModelMixin, mixins.DestroyModelMixin,
                               viewsets.GenericViewSet):
    """A knowledge base's documents: upload (multipart, `file`, several at once) answers 202
    with them `queued`; they are ingested in the background, their `status` and `progress`
    shown here."""

    serializer_class = serializers.KnowledgeDocumentSerializer
    lookup_url_kwarg = "document_id"
    lookup_value_regex = UUID
    parser_classes = [MultiPartParser, FormParser]

    def get_knowledge_base(self) -> KnowledgeBase:
        return get_object_or_404(KnowledgeBase, project=self.get_project(),
                                 pk=self.kwargs["knowledge_base_id"])

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return KnowledgeDocument.objects.none()
        return KnowledgeDocument.objects.filter(knowledge_base=self.get_knowledge_base())

    @extend_schema(request={"multipart/form-data": serializers.DocumentUploadSerializer},
                   responses={202: serializers.KnowledgeDocumentSerializer(many=True)})
    def create(self, request, **kwargs):
        knowledge_base = self.get_knowledge_base()
        body = serializers.DocumentUploadSerializer(data={"file": request.FILES.getlist("file")})
        body.is_valid(raise_exception=True)
        try:
            documents = services.add_documents(knowledge_base, body.validated_data["file"])
        except services.DocumentTooLarge as exc:
            raise PayloadTooLarge(str(exc)) from None
        worker.wake()
        return Response(self.get_serializer(documents, many=True).data,
                        status=status.HTTP_202_ACCEPTED)

    def perform_destroy(self, instance):
        services.delete_document(instance)
