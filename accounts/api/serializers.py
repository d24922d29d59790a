from django.contrib.auth import password_validation
from django.core import exceptions as django_exceptions
from rest_framework import serializers

from accounts.models import Project, User


class UserSerializer(serializers.ModelSerializer):
    class Meta:
        model = User
        fields = ["id", "email", "first_name", "last_name", "is_superuser", "date_joined"]
        read_only_fields = fields


class RegisterSerializer(serializers.ModelSerializer):
    password = serializers.CharField(write_only=True, max_length=128, style={"input_type": "password"})

    class Meta:
        model = User
        fields = ["id", "email", "password", "first_name", "last_name"]
        # No uniqueness check here: it would answer a taken address differently (the view
        # answers both alike).
        extra_kwargs = {"first_name": {"required": False}, "last_name": {"required": False},
                        "email": {"validators": []}}

    def validate_email(self, value):
        return value.lower()

    def validate(self, attrs):
        candidate = User(**{k: v for k, v in attrs.items() if k != "password"})
        try:
            password_validation.validate_password(attrs["password"], candidate)
        except django_exceptions.ValidationError as exc:
            raise serializers.ValidationError({"password": list(exc.messages)}) from exc
        return attrs

    def create(self, validated_data):
        return User.objects.create_user(**validated_data)


class RegistrationReceivedSerializer(serializers.Serializer):
    """The same answer whether the address was free or not: it reveals no account."""

    email = serializers.EmailField()
    detail = serializers.CharField()


class LoginSerializer(serializers.Serializer):
    # Any account name: a first admin made over LangBot's `user/init` may have a plain one.
    email = serializers.CharField(max_length=254)
    password = serializers.CharField(max_length=128, style={"input_type": "password"})


class RefreshSerializer(serializers.Serializer):
    refresh_token = serializers.CharField(max_length=4096)


class LogoutSerializer(serializers.Serializer):
    refresh_token = serializers.CharField(
        max_length=4096, required=False,
        help_text="Revoked too, when given: it issues no more access tokens.")


class AccessTokenSerializer(serializers.Serializer):
    access_token = serializers.CharField()
    token_type = serializers.CharField()


class TokenPairSerializer(AccessTokenSerializer):
    refresh_token = serializers.CharField()


class ProjectSerializer(serializers.ModelSerializer):
    owner_id = serializers.IntegerField(read_only=True)

    class Meta:
        model = Project
        fields = ["id", "name", "slug", "description", "owner_id", "created_at", "updated_at"]
        read_only_fields = ["id", "owner_id", "created_at", "updated_at"]
        extra_kwargs = {"slug": {"required": False, "allow_blank": True}}

    def validate_slug(self, value):
        """Unique among the owner's projects only; nobody learns what others named theirs."""
        owner = self.instance.owner if self.instance else self.context["request"].user
        clash = Project.objects.filter(owner=owner, slug=value)
        if self.instance is not None:
            clash = clash.exclude(pk=self.instance.pk)
        if value and clash.exists():
            raise serializers.ValidationError("You already have a project with this slug.")
        return value


class MemberSerializer(serializers.Serializer):
    email = serializers.EmailField()

    def validate_email(self, value):
        return value.lower()


class InvitedSerializer(serializers.Serializer):
    """What inviting answers, the same whether an account has the email or not."""

    email = serializers.EmailField()
    status = serializers.CharField(help_text="`invited`: the person with this email may accept.")
    code = serializers.CharField(help_text="What the invitee accepts with: shown only now.")


class AcceptInvitationSerializer(serializers.Serializer):
    code = serializers.CharField(max_length=200, help_text="The code the owner was shown when "
                                                          "inviting.")


class InvitationSerializer(serializers.Serializer):
    """An invitation to the signed-in user."""

    id = serializers.UUIDField()
    project_id = serializers.UUIDField(source="project.pk")
    project_name = serializers.CharField(source="project.name")
    invited_by = serializers.EmailField(source="invited_by.email")
    created_at = serializers.DateTimeField()
