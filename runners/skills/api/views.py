"""Skills over REST: anyone signed in lists and reads them (an agent type names them);
superusers install them (a zip upload: 201 with the skills it held; `preview` shows them
without installing) and remove them. An upload the skill store refuses (over its limits, a
path out of the package, no SKILL.md) is a 400 naming `file`."""

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response

from accounts.permissions import IsSuperuserOrReadOnly
from langhost.base.api import BadInput
from runners.skills import services
from runners.skills.api import serializers
from runners.skills.models import Skill


class SkillViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin,
                   viewsets.GenericViewSet):
    queryset = Skill.objects.all()
    serializer_class = serializers.SkillSerializer
    permission_classes = viewsets.GenericViewSet.permission_classes + [IsSuperuserOrReadOnly]
    lookup_field = "name"
    lookup_url_kwarg = "skill_name"
    lookup_value_regex = "[-a-zA-Z0-9_]+"
    parser_classes = [MultiPartParser, FormParser]

    def _upload(self, request) -> tuple[bytes, str]:
        body = serializers.SkillUploadSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        upload = body.validated_data["file"]
        return upload.read(), upload.name or "skill.zip"

    @extend_schema(request={"multipart/form-data": serializers.SkillUploadSerializer},
                   responses={201: serializers.SkillSerializer(many=True)})
    def create(self, request):
        """Install the skills of a zip upload (a skill of a name installed replaces it)."""
        try:
            installed = services.install(*self._upload(request))
        except services.SkillError as exc:
            raise BadInput(str(exc), field="file") from None
        return Response(self.get_serializer(installed, many=True).data,
                        status=status.HTTP_201_CREATED)

    @extend_schema(request={"multipart/form-data": serializers.SkillUploadSerializer},
                   responses=serializers.SkillPreviewSerializer(many=True))
    @action(detail=False, methods=["post"])
    def preview(self, request):
        """The skills a zip upload holds, as they would install, installing nothing."""
        try:
            return Response(services.preview(*self._upload(request)))
        except services.SkillError as exc:
            raise BadInput(str(exc), field="file") from None

    def perform_destroy(self, instance):
        services.delete(instance)
