"""JWTs that die with what they were issued for: a password change or a deactivation revokes
every token of that user, and a deleted user's tokens authenticate nobody.

Each token carries `pwd`, a digest of the user's password hash (Django's session auth hash, the
same that signs sessions out on a password change). Checking it costs nothing: the user row is
loaded to authenticate anyway.
"""

from rest_framework_simplejwt.authentication import JWTAuthentication
from rest_framework_simplejwt.exceptions import AuthenticationFailed, InvalidToken

PASSWORD_CLAIM = "pwd"


def password_digest(user) -> str:
    return user.get_session_auth_hash()[:16]


def require_current(token, user) -> None:
    """Raise unless `token` was issued for `user` as it is now (active, same password)."""
    if user is None or not user.is_active:
        raise AuthenticationFailed("The user is inactive or deleted.", code="user_inactive")
    if token.get(PASSWORD_CLAIM) != password_digest(user):
        raise InvalidToken("The token was revoked: the password changed since it was issued.")


class RevocableJWTAuthentication(JWTAuthentication):
    def get_user(self, validated_token):
        user = super().get_user(validated_token)
        require_current(validated_token, user)
        return user
