from django.db.models import Count, ProtectedError, Q
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from accounts.models import Project
from accounts.permissions import IsProjectOwnerOrReadOnly, IsSuperuserOrReadOnly
from langhost.base.api import UUID, Conflict, Unprocessable
from ledger.selectors.stats import agent_run_totals
from runners.api.serializers import catalogue as serializers
from runners.models import AgentInstance, AgentType, InvalidTransition


class AgentTypeViewSet(viewsets.ModelViewSet):
    """The agent catalogue: readable by everyone signed in, written by superusers."""

    lookup_value_regex = UUID
    queryset = AgentType.objects.prefetch_related("sub_agent_links")
    serializer_class = serializers.AgentTypeSerializer
    permission_classes = viewsets.ModelViewSet.permission_classes + [IsSuperuserOrReadOnly]
    filterset_fields = ["is_active", "runner_id", "slug"]
    ordering_fields = ["name", "slug", "created_at"]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def perform_destroy(self, instance):
        try:
            instance.delete()
        except ProtectedError as exc:
            count = instance.instances.count()
            raise Conflict(
                f"Agent type '{instance.slug}' still has {count} agent(s); "
                "deactivate it (is_active=false) instead of deleting it."
            ) from exc

    @action(detail=False, url_path=r"slug/(?P<slug>[-\w]+)")
    def by_slug(self, request, slug=None):
        agent_type = get_object_or_404(AgentType, slug=slug)
        return Response(self.get_serializer(agent_type).data)


class ProjectAgentViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.UpdateModelMixin,
    viewsets.GenericViewSet,
):
    """Agent instances of one project. Members see them; the project's owner (or a superuser)
    spawns, renames, pauses, resumes and terminates them. Deleting one terminates it; the row
    stays."""

    permission_classes = viewsets.GenericViewSet.permission_classes + [IsProjectOwnerOrReadOnly]
    lookup_value_regex = UUID
    serializer_class = serializers.AgentInstanceSerializer
    lookup_url_kwarg = "agent_id"
    filterset_fields = ["status", "agent_type"]
    ordering_fields = ["name", "created_at", "status"]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_project(self) -> Project:
        if not hasattr(self, "_project"):
            visible = Project.objects.visible_to(self.request.user)
            self._project = get_object_or_404(visible, pk=self.kwargs["project_id"])
            self.check_object_permissions(self.request, self._project)
        return self._project

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation: no signed-in user
            return AgentInstance.objects.none()
        return (
            AgentInstance.objects.filter(project=self.get_project())
            .select_related("agent_type")
            .order_by("created_at")
        )

    @extend_schema(request=serializers.SpawnAgentSerializer, responses={201: serializers.AgentInstanceSerializer})
    def create(self, request, *args, **kwargs):
        project = self.get_project()
        spawn = serializers.SpawnAgentSerializer(data=request.data)
        spawn.is_valid(raise_exception=True)
        data = spawn.validated_data
        if data.get("project_id") and data["project_id"] != project.pk:
            raise Unprocessable("project_id does not match the project in the URL.", field="project_id")
        agent_type = AgentType.objects.filter(pk=data["agent_type_id"]).first()
        if agent_type is None:
            raise Unprocessable("Agent type does not exist.", field="agent_type_id")
        if not agent_type.is_active:
            raise Unprocessable(
                f"Agent type '{agent_type.slug}' is inactive; agents cannot be spawned from it.",
                field="agent_type_id",
            )
        agent = AgentInstance.objects.create(
            name=data["name"], project=project, agent_type=agent_type, created_by=request.user
        )
        return Response(self.get_serializer(agent).data, status=status.HTTP_201_CREATED)

    def _transition(self, action_name: str) -> AgentInstance:
        agent = self.get_object()
        try:
            agent.transition(action_name)
        except InvalidTransition as exc:
            raise Unprocessable(str(exc), current_status=exc.current_status) from exc
        return agent

    @extend_schema(request=None)
    @action(detail=True, methods=["post"])
    def pause(self, request, **kwargs):
        return Response(self.get_serializer(self._transition("pause")).data)

    @extend_schema(request=None)
    @action(detail=True, methods=["post"])
    def resume(self, request, **kwargs):
        return Response(self.get_serializer(self._transition("resume")).data)

    @extend_schema(responses={200: serializers.TerminatedAgentSerializer})
    def destroy(self, request, *args, **kwargs):
        agent = self._transition("terminate")
        return Response({"message": f"Agent '{agent.name}' terminated.", "id": str(agent.pk)})

    @extend_schema(responses=serializers.AgentMetricsSerializer)
    @action(detail=True)
    def metrics(self, request, **kwargs):
        agent = self.get_object()
        counts = AgentInstance.objects.filter(project=agent.project_id).aggregate(
            total_instances=Count("pk"),
            active_instances=Count("pk", filter=Q(status=AgentInstance.Status.WORKING)),
            idle_instances=Count("pk", filter=Q(status=AgentInstance.Status.IDLE)),
        )
        return Response({**counts, **agent_run_totals(str(agent.pk))})
