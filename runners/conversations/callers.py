"""Who is asking the door: a signed-in user or the operator at the command line, what a
runner may know of them, their idempotency keys, and how many runs they may start a second."""

import hashlib
import math
from dataclasses import dataclass
from types import SimpleNamespace

from django.conf import settings
from django.contrib.auth import get_user_model
from rest_framework.throttling import UserRateThrottle

from runners.conversations.exceptions import TooManyRuns


@dataclass(frozen=True)
class Caller:
    """A signed-in user, or the operator at the machine's command line (trusted like a
    superuser)."""

    user: object | None = None

    @classmethod
    def operator(cls) -> "Caller":
        return cls(None)

    @property
    def is_superuser(self) -> bool:
        return self.user is None or self.user.is_superuser

    @property
    def actor(self) -> dict:
        if self.user is None:
            return {"actor_type": "operator", "actor_id": "cli", "actor_name": "operator"}
        # What the runner may know of the user (it may pass it on to a model provider): their
        # name, not their e-mail, unless LANGHOST_RUNNERS_SEE_EMAIL.
        name = (self.user.email if settings.LANGHOST_RUNNERS_SEE_EMAIL
                else f"{self.user.first_name} {self.user.last_name}".strip() or None)
        return {"actor_type": "user", "actor_id": str(self.user.pk), "actor_name": name}


def is_superuser_now(actor) -> bool:
    """Whether the actor a run recorded (`protocol.Actor`) is trusted as a superuser now: the
    operator, or a user who is one."""
    return actor.actor_type != "user" or get_user_model().objects.filter(
        pk=actor.actor_id, is_superuser=True).exists()


def idempotency_key(caller: Caller, target: str, client_key: str | None) -> str | None:
    """The ledger's idempotency key for a caller's event id: the id, made the caller's own.

    The same id from another caller, or for another agent or runner, is another event.
    """
    if not client_key:
        return None
    actor = caller.actor
    digest = hashlib.sha256(
        f"{actor['actor_type']}:{actor['actor_id']}|{target}".encode()).hexdigest()[:16]
    return f"{client_key}~{digest}"


class RunStartThrottle(UserRateThrottle):
    """A user's run starts, by whichever door: so many a second (`LANGHOST_RUNS_PER_USER`),
    counted in the cache (with Redis, across processes). Superusers and the operator are not
    counted: they run the platform."""

    scope = "run-starts"


def take_run_start(caller: Caller) -> None:
    """Count a run start of the caller's, or refuse it (nothing written) past their rate."""
    if caller.is_superuser:
        return
    throttle = RunStartThrottle()
    if not throttle.allow_request(SimpleNamespace(user=caller.user), None):
        wait = math.ceil(throttle.wait() or 1)
        raise TooManyRuns(f"Too many runs started; the next may start in {wait} s.",
                          retry_after=wait)
