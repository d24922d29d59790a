"""Failed sign-ins, throttled on every sign-in door (the API, the LangBot surface, the admin)
so that they lock out attackers, not the people they attack. Every door authenticates through
`django.contrib.auth.authenticate`, which django-axes watches:

- an account and an address together (`AXES_LOCKOUT_PARAMETERS`): `AXES_FAILURE_LIMIT`
  failures in a row from one address refuse that account from that address for
  `AXES_COOLOFF_TIME`, whichever door; the owner signs in from anywhere else;
- an account from every address: past `LANGHOST_SIGNIN_ACCOUNT_FAILURES` failures in all, an
  attempt from an address the account never signed in from waits (1 s, then twice as long
  after each further failure, at most `LANGHOST_SIGNIN_MAX_WAIT_SECONDS`) instead of being
  locked out; an address it signed in from before (`KnownAddress`) is not slowed;
- an address, on any accounts: `LANGHOST_SIGNIN_ADDRESS_FAILURES` failures refuse it
  (counted in the cache: per process with the default cache).

The address is the client's: `REMOTE_ADDR`, or, when that is a proxy of
`LANGHOST_TRUSTED_PROXIES`, the address in front of it in `X-Forwarded-For`.
"""

import functools
import ipaddress
import math

from axes.models import AccessAttempt
from axes.utils import reset_request
from django.conf import settings
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.db.models import Max, Sum
from django.dispatch import receiver
from django.http import HttpResponse, JsonResponse
from django.utils import timezone
from rest_framework.throttling import ScopedRateThrottle

from accounts.models import KnownAddress

# The LangBot-compatible surface answers in LangBot's shape.
LANGBOT_SIGN_IN = "/api/v1/user/"


def username_of(request, credentials: dict | None) -> str | None:
    """The account an attempt names: the API sends `email`, the admin's form `username`."""
    credentials = credentials or {}
    name = credentials.get("email") or credentials.get("username")
    return name.strip().lower() if isinstance(name, str) else None


def lockout_response(request, original_response=None, credentials=None) -> HttpResponse:
    wait = getattr(request, "signin_wait_seconds", None)
    if wait is not None:
        seconds = math.ceil(wait)
        text = f"Too many failed sign-ins for this account: try again in {seconds} seconds."
    else:
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


@functools.cache
def _networks(setting: str) -> tuple:
    return tuple(ipaddress.ip_network(part.strip(), strict=False)
                 for part in setting.split(",") if part.strip())


def _trusted(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in _networks(settings.LANGHOST_TRUSTED_PROXIES))


def client_address(request) -> str | None:
    """The client's address (see the module): also axes' (`AXES_CLIENT_IP_CALLABLE`) and the
    API throttles'. None for a request that came from no address (one made in-process)."""
    meta = getattr(request, "META", {}) or {}
    peer = meta.get("REMOTE_ADDR") or None
    if peer is None or not _trusted(peer):
        return peer
    chain = [part.strip() for part in meta.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    for address in reversed([part for part in chain if part]):
        if not _trusted(address):
            return address
    return peer


def remember_sign_in(request, user) -> None:
    """A correct sign-in: its address becomes one the account is not slowed from, and the
    failures of this account from it are forgotten (axes does that itself for the admin's
    sessions only)."""
    address = client_address(request) if request is not None else None
    if address is None:  # signed in in-process (a test's force_login): nothing to remember
        return
    KnownAddress.objects.update_or_create(user=user, address=address,
                                          defaults={"last_signed_in_at": timezone.now()})
    reset_request(request)


@receiver(user_logged_in)
def _remember_session_sign_in(sender, request=None, user=None, **kwargs) -> None:
    remember_sign_in(request, user)


def account_wait_seconds(account: str, address: str) -> float:
    """How much longer an attempt for `account` from `address` must wait (0: none)."""
    ceiling = settings.LANGHOST_SIGNIN_ACCOUNT_FAILURES
    attempts = AccessAttempt.objects.filter(username=account).aggregate(
        failures=Sum("failures_since_start"), last=Max("attempt_time"))
    over = (attempts["failures"] or 0) - ceiling
    if over < 0 or KnownAddress.objects.filter(user__email=account, address=address).exists():
        return 0.0
    wait = min(2.0 ** over, settings.LANGHOST_SIGNIN_MAX_WAIT_SECONDS)
    waited = (timezone.now() - attempts["last"]).total_seconds()
    return max(wait - waited, 0.0)


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


class SignInThrottleBackend:
    """Refuses a sign-in from an address with `LANGHOST_SIGNIN_ADDRESS_FAILURES` failures
    within the cool-off, and one for an account past its ceiling that must wait longer; the
    response is the lockout's (axes' middleware answers it). No `get_user`: it authenticates
    nobody, so sessions never name it as their backend."""

    def authenticate(self, request, **credentials):
        if request is None:
            return None
        address = client_address(request)
        failures = cache.get(ADDRESS_KEY.format(address)) or 0
        if failures >= settings.LANGHOST_SIGNIN_ADDRESS_FAILURES:
            request.axes_locked_out = True
            raise PermissionDenied("too many failed sign-ins from this address")
        account = username_of(request, credentials)
        if account and (wait := account_wait_seconds(account, address)) > 0:
            request.axes_locked_out = True
            request.signin_wait_seconds = wait
            raise PermissionDenied("too many failed sign-ins for this account")
        return None


class ClientAddressThrottle(ScopedRateThrottle):
    """DRF's scoped throttle, counting by the client's address as the sign-in throttle
    sees it (a proxy of `LANGHOST_TRUSTED_PROXIES` is not the client)."""

    def get_ident(self, request):
        return client_address(request)
