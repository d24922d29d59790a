"""A project's schedules (`/api/v1/projects/{id}/schedules`): a member sees and manages the
ones they made, the project's owner and superusers all of them; anyone else finds none (404).
Each run a schedule starts is its creator's (or last editor's) run, decided by the door as any
other."""

from rest_framework import viewsets

from accounts.api.scoping import ProjectScoped
from langhost.base.api import UUID
from runners.schedules import services
from runners.schedules.api.serializers import ScheduleSerializer
from runners.schedules.models import Schedule


class ScheduleViewSet(ProjectScoped, viewsets.ModelViewSet):
    serializer_class = ScheduleSerializer
    lookup_url_kwarg = "schedule_id"
    lookup_value_regex = UUID
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Schedule.objects.none()
        schedules = Schedule.objects.filter(project=self.get_project())
        user = self.request.user
        if user.is_superuser or self.get_project().owner_id == user.pk:
            return schedules
        return schedules.filter(created_by=user)  # a member's runs are their own

    def get_serializer_context(self):
        context = super().get_serializer_context()
        if not getattr(self, "swagger_fake_view", False):
            context["project"] = self.get_project()
        return context

    def perform_create(self, serializer):
        serializer.instance = services.save(Schedule(
            project=self.get_project(), created_by=self.request.user,
            **serializer.validated_data))

    def perform_update(self, serializer):
        schedule = self.get_object()
        for field, value in serializer.validated_data.items():
            setattr(schedule, field, value)
        # Its runs are its editor's from now on: the door decided for them, as them.
        schedule.created_by = self.request.user
        serializer.instance = services.save(schedule)
