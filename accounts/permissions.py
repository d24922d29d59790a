from rest_framework.permissions import SAFE_METHODS, BasePermission


class IsSuperuser(BasePermission):
    message = "Only superusers may do this."

    def has_permission(self, request, view):
        return bool(request.user and request.user.is_superuser)


class IsSuperuserOrReadOnly(IsSuperuser):
    def has_permission(self, request, view):
        return request.method in SAFE_METHODS or super().has_permission(request, view)


class IsProjectOwnerOrReadOnly(BasePermission):
    """Members read a project and its agents; its owner (or a superuser) changes them
    (`Project.changeable_by`). The object is a project, or something of one (`.project`)."""

    message = "Only the project's owner may change it."

    def has_object_permission(self, request, view, obj):
        if request.method in SAFE_METHODS:
            return True
        return getattr(obj, "project", obj).changeable_by(request.user)
