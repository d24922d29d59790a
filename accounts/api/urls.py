from django.urls import path

from accounts.api import views
from langhost.base.api import OptionalSlashRouter

router = OptionalSlashRouter()
router.register("projects", views.ProjectViewSet, basename="project")
router.register("invitations", views.InvitationViewSet, basename="invitation")

urlpatterns = [
    path("auth/register", views.RegisterView.as_view(), name="auth-register"),
    path("auth/login", views.LoginView.as_view(), name="auth-login"),
    path("auth/refresh", views.RefreshView.as_view(), name="auth-refresh"),
    path("auth/logout", views.LogoutView.as_view(), name="auth-logout"),
    path("auth/me", views.MeView.as_view(), name="auth-me"),
    *router.urls,
]
