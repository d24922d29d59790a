"""The API's JSON parser, and the upload limit it enforces."""

import json
import re

from django.conf import settings
from rest_framework import exceptions, status
from rest_framework.parsers import JSONParser, get_encoding

# A lone surrogate can only arrive escaped (`\ud800`): raw UTF-8 cannot encode one.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"


def body_limit(request) -> int | None:
    """The largest body `request` may send: a caller not signed in sends credentials, never
    files (`LANGHOST_ANONYMOUS_BODY_MAX_BYTES`); a signed-in one up to the upload limit.

    Asking never authenticates: DRF's session authentication reads the body for its CSRF
    check, so while it is under way the session's user is the one that counts."""
    user = getattr(request, "_user", None)  # set by DRF once authenticated
    if user is None:
        user = getattr(getattr(request, "_request", None), "user", None)
    if user is not None and not user.is_authenticated:
        return settings.LANGHOST_ANONYMOUS_BODY_MAX_BYTES
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def upload_limit_text(limit: int | None = None) -> str:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE if limit is None else limit
    return f"The request body is over the upload limit of {limit} bytes ({limit / 2**20:.1f} MiB)."


class StrictJSONParser(JSONParser):
    """DRF's JSON parser, also answering 400 for what it lets through to a 500: nesting
    deeper than Python parses, and text with a lone surrogate (no database stores it)."""

    def parse(self, stream, media_type=None, parser_context=None):
        encoding = get_encoding(parser_context or {})
        limit = body_limit((parser_context or {}).get("request"))
        raw = stream.read() if limit is None else stream.read(limit + 1)
        if limit is not None and len(raw) > limit:
            raise PayloadTooLarge(upload_limit_text(limit))
        try:
            text = raw.decode(encoding)
        except UnicodeDecodeError as exc:
            raise exceptions.ParseError(f"JSON parse error - {exc}") from None
        try:
            data = _DECODER.decode(text)
        except ValueError as exc:
            raise exceptions.ParseError(f"JSON parse error - {exc}") from None
        except RecursionError:
            raise exceptions.ParseError("JSON parse error - nested too deeply.") from None
        if _SURROGATE_ESCAPE.search(text):
            try:
                json.dumps(data, ensure_ascii=False).encode()
            except UnicodeEncodeError:
                raise exceptions.ParseError(
                    "JSON parse error - a string holds a lone surrogate (\\ud800-\\udfff), "
                    "which is not text.") from None
        return data


def _no_constant(name):
    raise ValueError(f"{name} is not valid JSON")


# Made once: `json.loads` with an option builds a decoder for every call.
_DECODER = json.JSONDecoder(parse_constant=_no_constant)
