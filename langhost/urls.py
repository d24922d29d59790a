from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from runners.admin_views import runtime_status

urlpatterns = [
    path("admin/runtime/", admin.site.admin_view(runtime_status), name="admin-runtime-status"),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    path("api/auth/", include("rest_framework.urls")),
    path("api/v1/", include("accounts.urls")),
    path("api/v1/", include("runners.urls")),
]
