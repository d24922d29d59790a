"""How the OpenAPI schema describes LangHost's authentication."""

from drf_spectacular.contrib.rest_framework_simplejwt import SimpleJWTScheme


class RevocableJWTScheme(SimpleJWTScheme):
    """A bearer JWT, as simplejwt's (`accounts.authentication` only adds revocation)."""

    target_class = "accounts.authentication.RevocableJWTAuthentication"
