import contextlib

from django.contrib.auth import authenticate
from django.contrib.auth.hashers import make_password
from django.db import IntegrityError, transaction
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import exceptions, generics, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework_simplejwt.exceptions import InvalidToken, TokenError
from rest_framework_simplejwt.tokens import RefreshToken

from accounts.api import serializers
from accounts.authentication import refuse_if_revoked, require_current, revoke
from accounts.models import Invitation, Membership, Project, User
from accounts.permissions import IsProjectOwnerOrReadOnly
from accounts.signin import ClientAddressThrottle, remember_sign_in
from accounts.tokens import token_pair
from langhost.base.api import UUID

REGISTRATION_RECEIVED = ("Registration received. If no account had this address, it has one "
                         "now: sign in with its password.")


@extend_schema_view(post=extend_schema(
    responses={202: serializers.RegistrationReceivedSerializer}))
class RegisterView(generics.CreateAPIView):
    """Registers an account. The answer is the same (202) whether the address was free or
    already had an account, which is left as it was: registering tells no one who has one."""

    permission_classes = [AllowAny]
    serializer_class = serializers.RegisterSerializer
    throttle_classes = [ClientAddressThrottle]
    throttle_scope = "register"

    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        email = serializer.validated_data["email"]
        if User.objects.filter(email__iexact=email).exists():
            make_password(serializer.validated_data["password"])  # as long as a new account
        else:
            with contextlib.suppress(IntegrityError), transaction.atomic():
                serializer.save()  # unless a concurrent registration took the address
        return Response({"email": email, "detail": REGISTRATION_RECEIVED},
                        status=status.HTTP_202_ACCEPTED)


class LoginView(APIView):
    permission_classes = [AllowAny]

    @extend_schema(request=serializers.LoginSerializer, responses=serializers.TokenPairSerializer)
    def post(self, request):
        serializer = serializers.LoginSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        # Django's request, where the sign-in throttle (axes) marks a locked-out account.
        user = authenticate(
            request._request,
            email=serializer.validated_data["email"].lower(),
            password=serializer.validated_data["password"],
        )
        if user is None:
            raise exceptions.AuthenticationFailed("Incorrect email or password.")
        remember_sign_in(request._request, user)
        return Response(token_pair(user))


class RefreshView(APIView):
    permission_classes = [AllowAny]

    @extend_schema(request=serializers.RefreshSerializer,
                   responses=serializers.AccessTokenSerializer)
    def post(self, request):
        serializer = serializers.RefreshSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        refresh = _refresh_token(serializer.validated_data["refresh_token"])
        user = User.objects.filter(pk=refresh.get("user_id")).first()
        require_current(refresh, user)  # not for a deleted, deactivated or re-passworded user
        return Response({"access_token": str(refresh.access_token), "token_type": "bearer"})


class LogoutView(APIView):
    """Sign out of the sign-in the access token (Authorization) or the refresh token (body)
    comes from: its refresh token issues no more access tokens, and every access token it
    issued is refused from now on."""

    permission_classes = [AllowAny]

    @extend_schema(request=serializers.LogoutSerializer, responses={204: None})
    def post(self, request):
        serializer = serializers.LogoutSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        refresh = serializer.validated_data.get("refresh_token")
        if refresh is None and request.auth is None:
            raise exceptions.ValidationError(
                {"refresh_token": ["Send the refresh token, or sign out with an access token "
                                   "(Authorization: Bearer)."]})
        if refresh is not None:
            token = _refresh_token(refresh)
            token.blacklist()
            revoke(token)
        if request.auth is not None:
            revoke(request.auth)
        return Response(status=status.HTTP_204_NO_CONTENT)


def _refresh_token(text: str) -> RefreshToken:
    """The refresh token `text`, if valid and not revoked (nor its sign-in)."""
    try:
        token = RefreshToken(text)
        refuse_if_revoked(token)
    except (TokenError, InvalidToken) as exc:
        raise exceptions.AuthenticationFailed(f"Invalid refresh token: {exc}") from exc
    return token


class MeView(generics.RetrieveAPIView):
    serializer_class = serializers.UserSerializer

    def get_object(self):
        return self.request.user


class ProjectViewSet(viewsets.ModelViewSet):

    lookup_value_regex = UUID
    serializer_class = serializers.ProjectSerializer
    permission_classes = viewsets.ModelViewSet.permission_classes + [IsProjectOwnerOrReadOnly]
    filterset_fields = ["slug"]
    ordering_fields = ["name", "created_at"]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation: no signed-in user
            return Project.objects.none()
        return Project.objects.visible_to(self.request.user).order_by("name")

    def perform_create(self, serializer):
        serializer.save(owner=self.request.user)

    @extend_schema(
        methods=["GET"], request=None, responses=serializers.UserSerializer(many=True)
    )
    @extend_schema(
        methods=["POST"],
        request=serializers.MemberSerializer,
        responses={202: serializers.InvitedSerializer},
    )
    @action(detail=True, methods=["get", "post"], filter_backends=[])
    def members(self, request, pk=None):
        """List members (in the list envelope), or invite someone by email (owner only).

        Inviting answers 202 `{email, status: "invited", code}` whether or not an account has
        that email. The code is shown this once (inviting again issues a new one): hand it to
        the person, who joins by accepting with it (`POST invitations/{id}/accept {code}`).
        """
        project = self.get_object()
        if request.method == "POST":
            serializer = serializers.MemberSerializer(data=request.data)
            serializer.is_valid(raise_exception=True)
            email = serializer.validated_data["email"]
            invitation, _ = Invitation.objects.get_or_create(
                project=project, email=email, defaults={"invited_by": request.user})
            return Response({"email": email, "status": "invited",
                             "code": invitation.issue_code()}, status=status.HTTP_202_ACCEPTED)
        page = self.paginate_queryset(project.members.order_by("email"))
        return self.get_paginated_response(serializers.UserSerializer(page, many=True).data)

    @action(detail=True, methods=["delete"], url_path=r"members/(?P<user_id>\d+)")
    def remove_member(self, request, pk=None, user_id=None):
        project = self.get_object()
        user = get_object_or_404(User, pk=user_id)
        Membership.objects.filter(project=project, user=user).delete()
        return Response(status=status.HTTP_204_NO_CONTENT)


class InvitationViewSet(viewsets.GenericViewSet):
    """The signed-in user's invitations to projects: list, accept (join the project), decline.
    Someone else's invitation is not found."""

    serializer_class = serializers.InvitationSerializer
    lookup_value_regex = UUID

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Invitation.objects.none()
        return (Invitation.objects.filter(email__iexact=self.request.user.email)
                .select_related("project", "invited_by").order_by("created_at"))

    def list(self, request):
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(request=serializers.AcceptInvitationSerializer,
                   responses=serializers.ProjectSerializer)
    @action(detail=True, methods=["post"])
    def accept(self, request, pk=None):
        """Join the project with the code its owner was shown when inviting you."""
        invitation = self.get_object()
        code = serializers.AcceptInvitationSerializer(data=request.data)
        code.is_valid(raise_exception=True)
        if not invitation.holds(code.validated_data["code"]):
            raise exceptions.ValidationError({"code": [
                "This is not the invitation's code: ask the project's owner for it (inviting "
                "again issues a new one)."]})
        project = invitation.project
        invitation.accept(request.user)
        return Response(serializers.ProjectSerializer(project,
                                                      context={"request": request}).data)

    def destroy(self, request, pk=None):
        self.get_object().delete()
        return Response(status=status.HTTP_204_NO_CONTENT)
