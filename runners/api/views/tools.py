from drf_spectacular.utils import extend_schema
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from accounts.permissions import IsSuperuser
from langhost.base.api import UUID
from runners.api.serializers import tools as serializers
from runners.models import McpServer
from runners.tools.refresh import refresh_tools_sync


class McpServerViewSet(viewsets.ModelViewSet):
    """MCP servers agent types name: superusers only, reading included."""

    lookup_value_regex = UUID
    queryset = McpServer.objects.all()
    serializer_class = serializers.McpServerSerializer
    permission_classes = viewsets.ModelViewSet.permission_classes + [IsSuperuser]
    filterset_fields = ["transport", "enabled"]
    ordering_fields = ["name", "created_at"]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    @extend_schema(request=None, responses=serializers.McpRefreshSerializer)
    @action(detail=True, methods=["post"])
    def refresh(self, request, pk=None):
        """List the server's tools now (starting or reaching it): 200 either way, `ok` says
        whether it answered; its tools, or the error, are kept on it too."""
        return Response(refresh_tools_sync(self.get_object()))
