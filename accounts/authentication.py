"""JWTs that die with what they were issued for: a password change or a deactivation revokes
every token of that user, and a deleted user's tokens authenticate nobody.

Each token carries `pwd`, a digest of the user's password hash (Django's session auth hash, the
same that signs sessions out on a password change), checked against the user as loaded.

Checking a token and loading its user cost more than most API calls: so for
`USER_CACHE_SECONDS` a token already checked is taken as checked (never past its expiry), and
its user as loaded. A change saved in this process (password, deactivation, deletion) takes
effect at once, one saved by another process within that time.
"""

import copy
import threading
from time import monotonic, time

from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.db.models.signals import post_delete, post_save
from rest_framework_simplejwt.authentication import JWTAuthentication
from rest_framework_simplejwt.exceptions import AuthenticationFailed, InvalidToken
from rest_framework_simplejwt.settings import api_settings

PASSWORD_CLAIM = "pwd"
USER_CACHE_SECONDS = 5.0

# user id → (monotonic expiry, the user as loaded or None for no such user, its password digest)
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
        _users[user_id] = (monotonic() + USER_CACHE_SECONDS, user,
                           password_digest(user) if user is not None else None)
    return user


def _forget_user(sender, instance, **kwargs) -> None:
    with _users_lock:
        _users.pop(getattr(instance, api_settings.USER_ID_FIELD), None)


post_save.connect(_forget_user, sender="accounts.User")
post_delete.connect(_forget_user, sender="accounts.User")


def _user_id(validated_token):
    try:
        return validated_token[api_settings.USER_ID_CLAIM]
    except KeyError:
        raise InvalidToken("The token names no user.") from None


def _cached_current(validated_token):
    """The token's user from the cache, if cached and the token matches it; else None."""
    entry = _users.get(_user_id(validated_token))
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


class RevocableJWTAuthentication(JWTAuthentication):
    """simplejwt's JWT authentication with revocable tokens and cached users; `aauthenticate`
    answers on the event loop whenever the user is cached (langhost.async_views)."""

    def get_validated_token(self, raw_token):
        key = raw_token if isinstance(raw_token, bytes) else raw_token.encode()
        entry = _tokens.get(key)
        if entry is not None and entry[0] > monotonic():
            return entry[1]
        validated_token = super().get_validated_token(raw_token)
        lifetime = min(USER_CACHE_SECONDS, validated_token["exp"] - time())
        if len(_tokens) >= TOKENS_KEPT:
            _tokens.clear()
        _tokens[key] = (monotonic() + lifetime, validated_token)
        return validated_token

    def get_user(self, validated_token):
        user = _cached_current(validated_token) or _load_current(validated_token)
        return copy.copy(user)  # each request its own instance: a view may change and save it

    async def aauthenticate(self, request):
        header = self.get_header(request)
        raw_token = None if header is None else self.get_raw_token(header)
        if raw_token is None:
            return None
        validated_token = self.get_validated_token(raw_token)
        user = (_cached_current(validated_token)
                or await sync_to_async(_load_current)(validated_token))
        return copy.copy(user), validated_token
