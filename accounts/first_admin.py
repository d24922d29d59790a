"""The first admin of a fresh install, made over the API (LangBot's `user/init`).

While no superuser exists (people may have registered already), `user/init` makes one, but
only for a caller on this machine (loopback, not forwarded by a proxy) or one holding the
one-time setup token that `manage.py serve` prints at start, as Jupyter prints its token. With
`LANGHOST_SECURE` the token is needed from anywhere. The token lives in the data dir (mode
0600) and is spent by the first admin it makes. Exactly one is made however many ask at once:
the `FirstAdmin` row it writes has one possible key.
"""

import contextlib
import ipaddress
import os
import secrets
import tempfile
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction

from accounts.models import FirstAdmin, User

SETUP_TOKEN_FILE = "setup_token"
# Headers a proxy adds: a request that carries one was not made on this machine.
FORWARDED_HEADERS = ("HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED", "HTTP_X_REAL_IP")


def _path() -> Path:
    return Path(settings.DATA_DIR) / SETUP_TOKEN_FILE


def setup_token() -> str:
    """The install's setup token, made the first time it is asked for."""
    path = _path()
    if not path.exists():
        # Written aside, then linked into place: processes starting together share one token.
        with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=".setup_token-") as draft:
            draft.write(secrets.token_urlsafe(32))
            draft.flush()
            with contextlib.suppress(FileExistsError):
                os.link(draft.name, path)
    return path.read_text().strip()


def spend_setup_token() -> None:
    _path().unlink(missing_ok=True)


def _token_matches(candidate: str | None) -> bool:
    try:
        stored = _path().read_text().strip()
    except FileNotFoundError:
        return False
    return bool(candidate) and secrets.compare_digest(candidate.encode(), stored.encode())


def from_this_machine(request) -> bool:
    """A request from a loopback address that no proxy forwarded."""
    if any(request.META.get(header) for header in FORWARDED_HEADERS):
        return False
    try:
        return ipaddress.ip_address(request.META.get("REMOTE_ADDR", "")).is_loopback
    except ValueError:
        return False


class AlreadyInitialized(Exception):
    """A superuser exists already (or another request made the first one meanwhile)."""


class AddressTaken(Exception):
    """Someone registered the first admin's address already."""


def has_admin() -> bool:
    return User.objects.filter(is_superuser=True).exists()


def make_first_admin(email: str, password: str) -> User:
    """The first superuser, unless one exists: AlreadyInitialized, AddressTaken."""
    try:
        with transaction.atomic():
            if has_admin():
                raise AlreadyInitialized
            if User.objects.filter(email__iexact=email).exists():
                raise AddressTaken
            user = User.objects.create_superuser(email=email, password=password)
            FirstAdmin.objects.create(user=user)
    except IntegrityError:  # a concurrent request's row, or its account with this address
        raise AlreadyInitialized from None
    spend_setup_token()
    return user


def may_make_first_admin(request, token: str | None) -> bool:
    """Whether this request may make the first admin (the caller checks that no superuser
    exists yet)."""
    return _token_matches(token) or (from_this_machine(request)
                                     and not settings.LANGHOST_SECURE)
