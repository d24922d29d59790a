"""What the runners' command-line tools share: finding an agent and a user by what an
operator types."""

import os
import uuid

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from runners.models import AgentInstance


def agent_named(given: str) -> AgentInstance:
    """The agent an id or a name names; CommandError when none, or several, do."""
    try:
        found = AgentInstance.objects.filter(pk=uuid.UUID(given))
    except ValueError:
        found = AgentInstance.objects.filter(name=given)
    agents = list(found.select_related("agent_type", "project")[:2])
    if not agents:
        raise CommandError(f"no agent {given!r} (give its id or its name)")
    if len(agents) > 1:
        raise CommandError(f"several agents are named {given!r}: give its id")
    return agents[0]


def user_named(email: str | None):
    """The account the command acts as: `email`'s, else the admin account's
    (LANGHOST_ADMIN_EMAIL), else the first superuser's; None (the operator) when there is
    none. CommandError for an e-mail nobody has."""
    users = get_user_model().objects
    if email:
        user = users.filter(email__iexact=email.strip()).first()
        if user is None:
            raise CommandError(f"no account {email!r}")
        return user
    admin_email = os.environ.get("LANGHOST_ADMIN_EMAIL", "").strip()
    return ((admin_email and users.filter(email__iexact=admin_email).first())
            or users.filter(is_superuser=True, is_active=True).order_by("pk").first())
