from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from langhost.api_root import ApiRoot
from langhost.health import healthz
from runners.admin.pages import (
    answer_interaction,
    dashboard_index,
    fork_conversation,
    playground,
    rerun_conversation,
    run_detail,
    runtime_status,
)
from runners.observability.views import metrics_view

# The API's routes first: Django tries them in order, and starting runs is the busiest.
urlpatterns = [
    path("api/v1/", include("runners.api.urls")),
    path("api/v1/", include("accounts.api.urls")),
    path("api/v1/", ApiRoot.as_view(), name="api-root"),
    path("", RedirectView.as_view(pattern_name="admin:index"), name="home"),
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics_view, name="metrics"),
    path("admin/runtime/", admin.site.admin_view(runtime_status), name="admin-runtime-status"),
    path("admin/playground/", admin.site.admin_view(playground), name="admin-playground"),
    path("admin/runs/<str:run_id>/", admin.site.admin_view(run_detail), name="admin-run-detail"),
    path("admin/conversations/<int:conversation_pk>/interactions/<int:interaction_pk>/answer/",
         admin.site.admin_view(answer_interaction), name="admin-interaction-answer"),
    path("admin/conversations/<int:conversation_pk>/entries/<int:entry_pk>/fork/",
         admin.site.admin_view(fork_conversation), name="admin-conversation-fork"),
    path("admin/conversations/<int:conversation_pk>/entries/<int:entry_pk>/rerun/",
         admin.site.admin_view(rerun_conversation), name="admin-conversation-rerun"),
    # The admin index with the dashboard (same URL and name as the admin's own index).
    path("admin/", admin.site.admin_view(dashboard_index), name="admin-dashboard"),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves Swagger UI's settings as a script of this origin: no inline script
    # for the Content-Security-Policy to refuse.
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="swagger-ui"),
    path("api/auth/", include("rest_framework.urls")),
]

handler400 = "langhost.base.api.bad_request"
handler404 = "langhost.base.api.not_found"
handler500 = "langhost.base.api.server_error"
