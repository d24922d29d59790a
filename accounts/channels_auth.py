"""Who is on the other end of a WebSocket: the admin's session cookie, or a JWT.

`TokenAuthMiddlewareStack(inner)` is Channels' `AuthMiddlewareStack` (session cookie) with a
JWT layer inside it. A token sent as `Authorization: Bearer <token>` or as `?token=<token>`
wins over the cookie; an invalid or expired token leaves the connection anonymous.

The session cookie only counts when the browser says the page came from this very origin
(scheme, host and port of the `Origin` those of the request, as Django's CSRF check has it, or
one of `CSRF_TRUSTED_ORIGINS`), so another site, or another app on another port of the same
host, cannot open a socket with an operator's cookie. Clients that send no `Origin` (scripts,
tests) are not browsers and keep it.
"""

from urllib.parse import parse_qs, urlsplit

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.http.request import split_domain_port, validate_host
from rest_framework.exceptions import AuthenticationFailed
from rest_framework_simplejwt.exceptions import InvalidToken, TokenError

from accounts.authentication import RevocableJWTAuthentication


def _header(scope, name: bytes) -> str | None:
    for key, value in scope.get("headers") or []:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def bearer_token(scope) -> str | None:
    """The JWT from the `Authorization: Bearer` header, else from `?token=`; None if neither."""
    header = _header(scope, b"authorization")
    if header:
        parts = header.split()
        if len(parts) == 2 and parts[0].lower() == "bearer":
            return parts[1]
    query = parse_qs((scope.get("query_string") or b"").decode("latin-1"))
    tokens = query.get("token")
    return tokens[0] if tokens else None


DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin_parts(origin: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an origin, the scheme's default port made explicit."""
    try:
        parts = urlsplit(origin)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    return parts.scheme, parts.hostname.lower(), port or DEFAULT_PORTS[parts.scheme]


def _secure(scope) -> bool:
    """Whether the browser reached us over TLS: directly (`wss`), or through a proxy that says
    so the way Django's `SECURE_PROXY_SSL_HEADER` names."""
    if scope.get("scheme") == "wss":
        return True
    header = settings.SECURE_PROXY_SSL_HEADER
    if not header:
        return False
    name, value = header
    sent = _header(scope, name.removeprefix("HTTP_").replace("_", "-").lower().encode())
    return sent is not None and sent.split(",")[0].strip() == value


def origin_allowed(scope) -> bool:
    """No `Origin` (not a browser), or the origin the request itself was made to (its `Host`,
    one of `ALLOWED_HOSTS`), or a trusted one."""
    origin = _header(scope, b"origin")
    if origin is None:
        return True
    if origin in settings.CSRF_TRUSTED_ORIGINS:
        return True
    host = _header(scope, b"host")
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    if not host or not validate_host(split_domain_port(host)[0], allowed):
        return False
    scheme = "https" if _secure(scope) else "http"
    expected = _origin_parts(f"{scheme}://{host}")
    return expected is not None and _origin_parts(origin) == expected


@database_sync_to_async
def user_for_token(raw_token: str):
    """The active user a valid access token names and the validated token, or
    (AnonymousUser, None)."""
    authentication = RevocableJWTAuthentication()
    try:
        validated_token = authentication.get_validated_token(raw_token)
        user = authentication.get_user(validated_token)
    except (InvalidToken, TokenError, AuthenticationFailed):
        return AnonymousUser(), None
    return (user, validated_token) if user.is_active else (AnonymousUser(), None)


class JWTAuthMiddleware(BaseMiddleware):
    """Replaces the session's user with the token's user when a token is sent (the validated
    token in `scope["auth_token"]`: a long-lived socket checks it is still good)."""

    async def __call__(self, scope, receive, send):
        scope = dict(scope)
        token = bearer_token(scope)
        if token is not None:
            scope["user"], scope["auth_token"] = await user_for_token(token)
        elif not origin_allowed(scope):
            scope["user"] = AnonymousUser()
        return await self.inner(scope, receive, send)


def TokenAuthMiddlewareStack(inner):  # noqa: N802  (named like Channels' AuthMiddlewareStack)
    return AuthMiddlewareStack(JWTAuthMiddleware(inner))
