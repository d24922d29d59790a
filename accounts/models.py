import hashlib
import hmac
import secrets
import uuid

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, BaseUserManager, PermissionsMixin
from django.db import models
from django.utils import timezone
from django.utils.text import slugify


class UserManager(BaseUserManager):
    use_in_migrations = True

    def _create_user(self, email, password, **fields):
        if not email:
            raise ValueError("An email address is required.")
        user = self.model(email=self.normalize_email(email).lower(), **fields)
        user.set_password(password)
        user.save(using=self._db)
        return user

    def create_user(self, email, password=None, **fields):
        fields.setdefault("is_staff", False)
        fields.setdefault("is_superuser", False)
        return self._create_user(email, password, **fields)

    def create_superuser(self, email, password=None, **fields):
        fields.update(is_staff=True, is_superuser=True)
        return self._create_user(email, password, **fields)


class User(AbstractBaseUser, PermissionsMixin):
    """A person: signs in with an email address."""

    email = models.EmailField(unique=True, max_length=254)
    first_name = models.CharField(max_length=150, blank=True)
    last_name = models.CharField(max_length=150, blank=True)
    is_staff = models.BooleanField(
        default=False, help_text="Can sign in to the admin site."
    )
    is_active = models.BooleanField(default=True)
    date_joined = models.DateTimeField(default=timezone.now)

    objects = UserManager()

    USERNAME_FIELD = "email"
    EMAIL_FIELD = "email"
    REQUIRED_FIELDS = []

    class Meta:
        ordering = ["email"]

    def __str__(self):
        return self.email

    def get_full_name(self):
        return f"{self.first_name} {self.last_name}".strip() or self.email

    def get_short_name(self):
        return self.first_name or self.email


class ProjectQuerySet(models.QuerySet):
    def visible_to(self, user):
        """Superusers see every project; others the ones they own or belong to."""
        if user.is_superuser:
            return self
        return self.filter(models.Q(owner=user) | models.Q(members=user)).distinct()


class Project(models.Model):
    """The unit of ownership and access: agents, conversations and runs live in one."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    # Unique per owner: two people may each have a project `demo`. Derived from the name
    # when left blank.
    slug = models.SlugField(max_length=100, blank=True,
                            help_text="Short name in URLs; made from the name when left blank.")
    description = models.TextField(blank=True, max_length=10_000)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="owned_projects"
    )
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="projects", blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ProjectQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["owner", "slug"],
                                               name="project_slug_unique_per_owner")]

    def __str__(self):
        return self.name

    def save(self, *args, **kwargs):
        if not self.slug:
            self.slug = self.free_slug()
        super().save(*args, **kwargs)

    def free_slug(self) -> str:
        """A slug from the name that none of the owner's other projects has."""
        base = slugify(self.name)[:90] or "project"
        taken = set(Project.objects.filter(owner_id=self.owner_id, slug__startswith=base)
                    .exclude(pk=self.pk).values_list("slug", flat=True))
        slug, number = base, 2
        while slug in taken:
            slug, number = f"{base}-{number}", number + 1
        return slug

    def changeable_by(self, user) -> bool:
        """Project roles, the one rule: its owner (or a superuser) changes the project and
        its agents (rename, pause, resume, terminate, spawn); members only use them."""
        return user.is_superuser or self.owner_id == user.pk


class Membership(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "user"], name="unique_project_member")
        ]

    def __str__(self):
        return f"{self.user} in {self.project}"


class RevokedToken(models.Model):
    """An access token signed out before its expiry (by its `jti`): refused until it would
    have expired anyway, then forgotten."""

    jti = models.CharField(max_length=255, unique=True)
    expires_at = models.DateTimeField(db_index=True)

    def __str__(self):
        return self.jti


class KnownAddress(models.Model):
    """An address a user signed in from: failed sign-ins for the account from elsewhere do not
    slow its sign-ins from here (`accounts.signin`)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="known_addresses")
    address = models.CharField(max_length=64)
    last_signed_in_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "address"],
                                               name="unique_known_address")]

    def __str__(self):
        return f"{self.user} from {self.address}"


class Invitation(models.Model):
    """A project's owner asks someone, by email, to join it, and is shown a code once to hand
    them; the person with that email and that code accepts (and becomes a member) or declines.
    Holding the address alone (registering it first) is not enough. Whether an account has
    that email is never said to the owner."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField()
    invited_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                   related_name="+")
    code_hash = models.CharField(max_length=64, editable=False, default="",
                                 help_text="SHA-256 of the code the invitee accepts with.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "email"],
                                               name="unique_project_invitation")]

    def __str__(self):
        return f"{self.email} to {self.project}"

    def issue_code(self) -> str:
        """A new code for this invitation (an earlier one stops working), to show once."""
        code = secrets.token_urlsafe(24)
        self.code_hash = hashlib.sha256(code.encode()).hexdigest()
        self.save(update_fields=["code_hash"])
        return code

    def holds(self, code) -> bool:
        return bool(self.code_hash) and isinstance(code, str) and hmac.compare_digest(
            hashlib.sha256(code.encode()).hexdigest(), self.code_hash)

    def accept(self, user) -> "Membership":
        """`user` (whose email the invitation names, holding its code) joins the project; the
        invitation ends."""
        membership, _ = Membership.objects.get_or_create(project=self.project, user=user)
        self.delete()
        return membership


class FirstAdmin(models.Model):
    """The superuser `user/init` made: one row at most (its key is always 1), so concurrent
    first requests make exactly one, whichever commits first."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1, editable=False)
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                related_name="+")
    made_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"first admin: {self.user}"
