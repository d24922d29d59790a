"""JWTs that die with what they were issued for: a password change or a deactivation revokes
every token of that user, a deleted user's tokens authenticate nobody, and signing out revokes
the access token signed out with (`revoke`).

Each token carries `pwd`, a digest of the user's password hash (Django's session auth hash, the
same that signs sessions out on a password change), checked against the user as loaded.

Checking a token and loading its user cost more than most API calls: so for
`USER_CACHE_SECONDS` a token already checked is taken as checked (never past its expiry), and
its user as loaded. A change saved in this process (password, deactivation, deletion, sign-out)
takes effect at once, one saved by another process within that time.
"""

import copy
import threading
from datetime import UTC, datetime
from importlib import import_module
from time import monotonic, time

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import SESSION_KEY, get_user_model
from django.db.models.signals import post_delete, post_save
from django.utils import timezone
from rest_framework_simplejwt.authentication import JWTAuthentication
from rest_framework_simplejwt.exceptions import AuthenticationFailed, InvalidToken
from rest_framework_simplejwt.settings import api_settings

from accounts.models import RevokedToken

PASSWORD_CLAIM = "pwd"
# The sign-in a token comes from (its refresh token's first jti): signing out of it refuses
# the refresh token and every access token it issued, whichever of them signs out.
SIGN_IN_CLAIM = "sid"
USER_CACHE_SECONDS = 5.0

# user id (as a token names it: a string) → (monotonic expiry, the user as loaded or None for no
# such user, its password digest)
_users: dict[object, tuple[float, object, str | None]] = {}
_users_lock = threading.Lock()
# raw token → (monotonic expiry, the validated token); emptied when it grows past its size
_tokens: dict[bytes, tuple[float, object]] = {}
TOKENS_KEPT = 10_000


def password_digest(user) -> str:
    return user.get_session_auth_hash()[:16]


def require_current(token, user, digest: str | None = None) -> None:
    """Raise unless `token` was issued for `user` as it is now (active, same password);
    `digest` is the user's `password_digest` when known."""
    if user is None or not user.is_active:
        raise AuthenticationFailed("The user is inactive or deleted.", code="user_inactive")
    if token.get(PASSWORD_CLAIM) != (digest or password_digest(user)):
        raise InvalidToken("The token was revoked: the password changed since it was issued.")


def _load_user(user_id):
    user = get_user_model().objects.filter(**{api_settings.USER_ID_FIELD: user_id}).first()
    with _users_lock:
        _users[str(user_id)] = (monotonic() + USER_CACHE_SECONDS, user,
                                password_digest(user) if user is not None else None)
    return user


def _forget_user(sender, instance, **kwargs) -> None:
    with _users_lock:
        _users.pop(str(getattr(instance, api_settings.USER_ID_FIELD)), None)


post_save.connect(_forget_user, sender="accounts.User")
post_delete.connect(_forget_user, sender="accounts.User")


def _user_id(validated_token):
    try:
        return validated_token[api_settings.USER_ID_CLAIM]
    except KeyError:
        raise InvalidToken("The token names no user.") from None


def _cached_current(validated_token):
    """The token's user from the cache, if cached and the token matches it; else None."""
    entry = _users.get(str(_user_id(validated_token)))
    if entry is None or entry[0] <= monotonic():
        return None
    try:
        require_current(validated_token, entry[1], entry[2])
    except (AuthenticationFailed, InvalidToken):
        return None  # perhaps changed since it was cached: loaded afresh before refusing
    return entry[1]


def _load_current(validated_token):
    user = _load_user(_user_id(validated_token))
    require_current(validated_token, user)
    return user


def revoke(validated_token) -> None:
    """Sign the token and its sign-in out: refused from now on in this process, in the others
    once their `USER_CACHE_SECONDS` of trust in them run out. Signed-out tokens past their
    expiry are forgotten meanwhile."""
    revoked = {validated_token[api_settings.JTI_CLAIM]:
               datetime.fromtimestamp(validated_token["exp"], UTC)}
    if sign_in := validated_token.get(SIGN_IN_CLAIM):
        revoked[sign_in] = timezone.now() + api_settings.REFRESH_TOKEN_LIFETIME
    for jti, expires_at in revoked.items():
        RevokedToken.objects.get_or_create(jti=jti, defaults={"expires_at": expires_at})
    RevokedToken.objects.filter(expires_at__lt=timezone.now()).delete()
    for key, (_, cached) in list(_tokens.items()):
        if cached is validated_token or {cached.get(api_settings.JTI_CLAIM),
                                         cached.get(SIGN_IN_CLAIM)} & revoked.keys():
            _tokens.pop(key, None)


def refuse_if_revoked(validated_token) -> None:
    """InvalidToken when the token, or the sign-in it comes from, was signed out."""
    ids = {validated_token.get(api_settings.JTI_CLAIM), validated_token.get(SIGN_IN_CLAIM)}
    if RevokedToken.objects.filter(jti__in=ids - {None}).exists():
        raise InvalidToken("The token was revoked: it was signed out.")


def _token_key(raw_token) -> bytes:
    return raw_token if isinstance(raw_token, bytes) else raw_token.encode()


def _cached_token(raw_token):
    entry = _tokens.get(_token_key(raw_token))
    return entry[1] if entry is not None and entry[0] > monotonic() else None


class RevocableJWTAuthentication(JWTAuthentication):
    """simplejwt's JWT authentication with revocable tokens and cached users; `aauthenticate`
    answers on the event loop whenever the token and its user are cached
    (langhost.base.async_views)."""

    def get_validated_token(self, raw_token):
        if (cached := _cached_token(raw_token)) is not None:
            return cached
        validated_token = super().get_validated_token(raw_token)
        refuse_if_revoked(validated_token)
        lifetime = min(USER_CACHE_SECONDS, validated_token["exp"] - time())
        if len(_tokens) >= TOKENS_KEPT:
            _tokens.clear()
        _tokens[_token_key(raw_token)] = (monotonic() + lifetime, validated_token)
        return validated_token

    def get_user(self, validated_token):
        user = _cached_current(validated_token) or _load_current(validated_token)
        return copy.copy(user)  # each request its own instance: a view may change and save it

    async def aauthenticate(self, request):
        header = self.get_header(request)
        raw_token = None if header is None else self.get_raw_token(header)
        if raw_token is None:
            return None
        validated_token = (_cached_token(raw_token)
                           or await sync_to_async(self.get_validated_token)(raw_token))
        user = (_cached_current(validated_token)
                or await sync_to_async(_load_current)(validated_token))
        return copy.copy(user), validated_token


def _session_of(session_key: str, user) -> bool:
    """Whether the session is still `user`'s: not signed out (flushed), nor expired."""
    session = import_module(settings.SESSION_ENGINE).SessionStore(session_key).load()
    return session.get(SESSION_KEY) == str(user.pk)


def still_signed_in(user, digest: str, validated_token=None, session_key: str | None = None
                    ) -> bool:
    """Whether `user`, signed in with `digest` (and `validated_token`, if by token, or the
    session `session_key`, if by the admin's cookie), still is: active, the same password, the
    token neither expired nor signed out, the session still theirs. Read from the database:
    for a connection that outlives a request (a WebSocket)."""
    current = _load_user(str(getattr(user, api_settings.USER_ID_FIELD)))
    if current is None or not current.is_active or password_digest(current) != digest:
        return False
    if validated_token is None:
        return session_key is None or _session_of(session_key, current)
    if validated_token["exp"] <= time():
        return False
    try:
        refuse_if_revoked(validated_token)
    except InvalidToken:
        return False
    return True
