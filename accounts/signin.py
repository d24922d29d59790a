"""Failed sign-ins, throttled on every sign-in door (the API, the LangBot surface, the admin)
by django-axes: every door authenticates through `django.contrib.auth.authenticate`, which axes
watches. An account with `AXES_FAILURE_LIMIT` failures in a row is refused for
`AXES_COOLOFF_TIME`, whichever door the attempts came through; other accounts sign in as usual.
An address with many more failures (any accounts) is refused the same way
(`AddressThrottleBackend`, counted in the cache: per process with the default cache).
"""

import math

from django.conf import settings
from django.contrib.auth.signals import user_login_failed
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.dispatch import receiver
from django.http import HttpResponse, JsonResponse

# The LangBot-compatible surface answers in LangBot's shape.
LANGBOT_SIGN_IN = "/api/v1/user/"


def username_of(request, credentials: dict | None) -> str | None:
    """The account an attempt names: the API sends `email`, the admin's form `username`."""
    credentials = credentials or {}
    name = credentials.get("email") or credentials.get("username")
    return name.strip().lower() if isinstance(name, str) else None


def lockout_response(request, original_response=None, credentials=None) -> HttpResponse:
    seconds = math.ceil(settings.AXES_COOLOFF_TIME.total_seconds())
    text = f"Too many failed sign-ins: try again in {math.ceil(seconds / 60)} minutes."
    if request.path.startswith(LANGBOT_SIGN_IN):
        response = JsonResponse({"code": 1, "msg": text}, status=429)
    elif request.path.startswith("/api/"):
        response = JsonResponse({"detail": text}, status=429)
    else:
        response = HttpResponse(text, status=429, content_type="text/plain; charset=utf-8")
    response["Retry-After"] = str(seconds)
    return response


# Per client address, on top of axes' per-account lockout: a higher bar, so that one address
# trying many accounts is stopped while the people behind a shared address still sign in.
ADDRESS_KEY = "signin-failures:{}"


def client_address(request) -> str:
    return (getattr(request, "META", {}) or {}).get("REMOTE_ADDR") or "unknown"


@receiver(user_login_failed)
def count_address_failure(sender, credentials=None, request=None, **kwargs) -> None:
    if request is None:
        return
    key = ADDRESS_KEY.format(client_address(request))
    timeout = settings.AXES_COOLOFF_TIME.total_seconds()
    if not cache.add(key, 1, timeout):
        try:
            cache.incr(key)
        except ValueError:  # expired in between
            cache.add(key, 1, timeout)


class AddressThrottleBackend:
    """Refuses every sign-in from an address with `LANGHOST_SIGNIN_ADDRESS_FAILURES` failures
    within the cool-off; the response is the lockout's (axes' middleware answers it). No
    `get_user`: it authenticates nobody, so sessions never name it as their backend."""

    def authenticate(self, request, **credentials):
        if request is None:
            return None
        failures = cache.get(ADDRESS_KEY.format(client_address(request))) or 0
        if failures >= settings.LANGHOST_SIGNIN_ADDRESS_FAILURES:
            request.axes_locked_out = True
            raise PermissionDenied("too many failed sign-ins from this address")
        return None
