"""Plugins over REST: anyone signed in lists them; superusers install one from a package
upload (201, loaded by the runtime within seconds, without a restart), enable or disable it
(`PATCH {enabled}`) and delete it. An upload that is not an installable plugin is a 400 naming
`file`, with the reason."""

from pathlib import Path

import langbot_plugin
from django.http import FileResponse
from django.views.decorators.http import require_GET
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.response import Response

from accounts.permissions import IsSuperuserOrReadOnly
from langhost.base.api import BadInput
from runners.models import PluginInstallation
from runners.plugins import install
from runners.plugins.api import serializers


class PluginViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin,
                    mixins.UpdateModelMixin, viewsets.GenericViewSet):
    queryset = PluginInstallation.objects.all()
    serializer_class = serializers.PluginSerializer
    permission_classes = viewsets.GenericViewSet.permission_classes + [IsSuperuserOrReadOnly]
    parser_classes = [JSONParser, MultiPartParser, FormParser]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    @extend_schema(request={"multipart/form-data": serializers.PluginUploadSerializer},
                   responses={201: serializers.PluginSerializer})
    def create(self, request):
        """Install the plugin of a package upload."""
        body = serializers.PluginUploadSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        upload = body.validated_data["file"]
        try:
            installation = install.install_plugin(upload.read(), upload.name or "plugin.zip")
        except install.PluginRefused as exc:
            raise BadInput(str(exc), field="file") from None
        return Response(self.get_serializer(installation).data, status=status.HTTP_201_CREATED)

    def perform_update(self, serializer):
        if "enabled" in serializer.validated_data:
            install.set_enabled(serializer.instance, serializer.validated_data["enabled"])

    def perform_destroy(self, instance):
        install.delete_plugin(instance)


PAGE_SCRIPT = Path(langbot_plugin.__file__).parent / "assets" / "langbot-page-sdk.js"


@require_GET
def page_script(request):
    """The SDK's page script, which a plugin's page loads from this path, as from LangBot
    (`runners.plugins.pages`). Public: it is the SDK's, the same for everyone."""
    response = FileResponse(PAGE_SCRIPT.open("rb"), content_type="text/javascript")
    response["Cache-Control"] = "public, max-age=3600"
    return response
