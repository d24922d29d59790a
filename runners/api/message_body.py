"""A message's body as both doors that take one read it, REST (`POST .../messages`) and the
conversation socket: its parts (text, then each attachment, inline files decoded), its
multitask strategy and its webhook, each refusal a 400 (or 413) naming the field."""

import base64
import binascii
import re

from rest_framework import status
from rest_framework.exceptions import APIException, ValidationError

from langhost.base.api import BadInput
from ledger.services.artifacts import max_bytes
from runners.api.serializers.conversations import MessageSerializer
from runners.api.serializers.runs import WebhookField
from runners.conversations.input import Part


class PayloadTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request is too large."
    default_code = "too_large"


def decode_base64(value: str, field: str) -> tuple[bytes, str | None]:
    """Bytes of a base64 string or data URL (and the data URL's MIME type); 413 when the
    decoded size would pass the artifact limit, 400 when it is not base64."""
    mime = None
    match = re.match(r"^data:([^;,]*)(;[^,]*)?,", value[:300])
    if match:
        mime, value = match.group(1) or None, value[match.end():]
    limit = max_bytes()
    if len(value) // 4 * 3 - 2 > limit:
        raise PayloadTooLarge(f"{field} is larger than the {limit}-byte limit for a file "
                              "(LANGHOST_ARTIFACT_MAX_BYTES).")
    try:
        data = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise BadInput(f"{field} is not valid base64.", field="attachments") from None
    if len(data) > limit:
        raise PayloadTooLarge(f"{field} is {len(data)} bytes, over the {limit}-byte limit for a "
                              "file (LANGHOST_ARTIFACT_MAX_BYTES).")
    return data, mime


def message_webhook(data) -> str:
    """The message's `webhook`, checked (a 400 naming it if LangHost may not call it)."""
    if not isinstance(data, dict) or not data.get("webhook"):
        return ""
    try:
        return WebhookField().run_validation(data["webhook"])
    except ValidationError as exc:
        raise BadInput(str(exc.detail[0]), field="webhook") from None


def message_multitask(data) -> str | None:
    """The message's `multitask_strategy`, if it names one (the door checks which)."""
    value = data.get("multitask_strategy") if isinstance(data, dict) else None
    if value is not None and not isinstance(value, str):
        raise BadInput("multitask_strategy must be a string.", field="multitask_strategy")
    return value or None


def message_parts(data) -> list[Part]:
    """The parts of a message body: its text, then each attachment, in order."""
    body = MessageSerializer(data=data)
    body.is_valid(raise_exception=True)
    text = body.validated_data.get("text") or ""
    attachments = body.validated_data.get("attachments") or []
    if not text.strip() and not attachments:
        raise BadInput("A message needs text or at least one attachment.", field="text")
    parts = [Part(text=text)] if text else []
    for index, item in enumerate(attachments):
        name = item.get("name") or ""
        if "url" in item:
            parts.append(Part(url=item["url"], name=name,
                              mime_type=item.get("mime_type") or "application/octet-stream"))
            continue
        data, data_mime = decode_base64(item["data"], f"attachments[{index}].data")
        parts.append(Part(data=data, name=name, mime_type=item.get("mime_type") or data_mime
                          or "application/octet-stream"))
    return parts
