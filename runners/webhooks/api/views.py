"""A project's webhook over REST: `GET` (members) and `PUT {url}` (its owner) at
`projects/{project_id}/webhook`; `POST .../webhook/rotate-secret` (its owner) answers a new
signing secret, this once — it is never shown again (`secret_set` says one exists)."""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.models import Project
from langhost.base.api import BadInput
from runners.webhooks import services
from runners.webhooks.models import ProjectWebhook


class ProjectWebhookSerializer(serializers.Serializer):
    url = serializers.CharField(max_length=2000, allow_blank=True,
                                help_text="Where every run of the project reports how it ended "
                                          "(empty: nowhere).")
    secret_set = serializers.BooleanField(read_only=True)


class SecretSerializer(serializers.Serializer):
    secret = serializers.CharField(help_text="The new signing secret: shown this once.")


class ProjectWebhookView(APIView):
    def _project(self, request, project_id, change: bool) -> Project:
        project = get_object_or_404(Project.objects.visible_to(request.user), pk=project_id)
        if change and not project.changeable_by(request.user):
            raise PermissionDenied("Only the project's owner may change its webhook.")
        return project

    @staticmethod
    def _shown(project: Project) -> dict:
        webhook = ProjectWebhook.objects.filter(project=project).first()
        return {"url": webhook.url if webhook else "", "secret_set": webhook is not None}

    @extend_schema(responses=ProjectWebhookSerializer)
    def get(self, request, project_id):
        return Response(self._shown(self._project(request, project_id, change=False)))

    @extend_schema(request=ProjectWebhookSerializer, responses=ProjectWebhookSerializer)
    def put(self, request, project_id):
        project = self._project(request, project_id, change=True)
        body = ProjectWebhookSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            services.set_url(str(project.pk), body.validated_data["url"])
        except services.WebhookError as exc:
            raise BadInput(str(exc), field="url") from None
        return Response(self._shown(project))


class RotateSecretView(ProjectWebhookView):
    @extend_schema(request=None, responses=SecretSerializer)
    def post(self, request, project_id):
        project = self._project(request, project_id, change=True)
        return Response({"secret": services.rotate_secret(str(project.pk))})
