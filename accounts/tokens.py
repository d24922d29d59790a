"""JWT pairs in the shape API clients expect."""

from rest_framework_simplejwt.tokens import RefreshToken


def token_pair(user) -> dict:
    refresh = RefreshToken.for_user(user)
    return {
        "access_token": str(refresh.access_token),
        "refresh_token": str(refresh),
        "token_type": "bearer",
    }
