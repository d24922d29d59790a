"""JWT pairs in the shape API clients expect."""

from rest_framework_simplejwt.settings import api_settings
from rest_framework_simplejwt.tokens import AccessToken, RefreshToken

from accounts.authentication import PASSWORD_CLAIM, SIGN_IN_CLAIM, password_digest


def token_pair(user) -> dict:
    refresh = RefreshToken.for_user(user)
    # Both copied into each access token the refresh token issues.
    refresh[PASSWORD_CLAIM] = password_digest(user)
    refresh[SIGN_IN_CLAIM] = refresh[api_settings.JTI_CLAIM]
    return {
        "access_token": str(refresh.access_token),
        "refresh_token": str(refresh),
        "token_type": "bearer",
    }


def access_token_for(user) -> str:
    """An access token alone (no refresh token to revoke, so nothing stored)."""
    token = AccessToken.for_user(user)
    token[PASSWORD_CLAIM] = password_digest(user)
    return str(token)
