"""What leaves LangHost in telemetry carries no credential: a token in a URL's query (a
WebSocket's `?token=`), an attachment link's token in its path, a bearer token or a JWT
anywhere in a text is replaced by `REDACTED` (`scrubbed`)."""

import re

REDACTED = "REDACTED"
SENSITIVE_PARAMETERS = frozenset({
    "token", "access_token", "refresh_token", "id_token", "jwt", "key", "api_key", "apikey",
    "code", "signature", "sig", "password", "secret", "setup_token", "auth", "authorization"})
_PARAMETER = re.compile(r"(?P<lead>^|[?&;])(?P<name>[^=&#;?\s/]+)=(?P<value>[^&#;\s]*)")
_LINK_TOKEN = re.compile(r"(?P<lead>/attachments/)[^/?#\s]+")
_BEARER = re.compile(r"(?i)(?P<lead>\b(?:bearer|token)\s+)[\w.~+/=-]+")
_JWT = re.compile(r"\beyJ[\w-]*\.[\w-]+\.[\w-]*")


def _parameter(match: re.Match) -> str:
    if match["name"].lower() in SENSITIVE_PARAMETERS:
        return f"{match['lead']}{match['name']}={REDACTED}"
    return match[0]


def scrubbed(text: str) -> str:
    text = _PARAMETER.sub(_parameter, text)
    text = _LINK_TOKEN.sub(lambda match: match["lead"] + REDACTED, text)
    text = _BEARER.sub(lambda match: match["lead"] + REDACTED, text)
    return _JWT.sub(REDACTED, text)


def scrubbed_value(value):
    """An attribute's value scrubbed: texts, and the texts of a sequence."""
    if isinstance(value, str):
        return scrubbed(value)
    if isinstance(value, (list, tuple)):
        return type(value)(scrubbed_value(item) for item in value)
    return value
