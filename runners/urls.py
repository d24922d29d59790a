from rest_framework.routers import SimpleRouter

from . import views

router = SimpleRouter(trailing_slash="/?")
router.register("agent-types", views.AgentTypeViewSet, basename="agent-type")
router.register(
    r"projects/(?P<project_id>[0-9a-f-]{36})/agents", views.ProjectAgentViewSet,
    basename="project-agent",
)

urlpatterns = router.urls
