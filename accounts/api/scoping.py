"""Views under `projects/{project_id}/`."""

from django.shortcuts import get_object_or_404

from accounts.models import Project


class ProjectScoped:
    """Views under `projects/{project_id}/`: a project the caller cannot see is not found,
    before anything else about the request is looked at."""

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        if not getattr(self, "swagger_fake_view", False):
            self.get_project()

    def get_project(self) -> Project:
        if not hasattr(self, "_project"):
            self._project = get_object_or_404(Project.objects.visible_to(self.request.user),
                                              pk=self.kwargs["project_id"])
        return self._project
