"""Webhooks: when a run ends, its outcome is POSTed once to each URL that asks for it — the
run's own (`webhook` of the request), its agent type's, its project's — signed, and retried
with backoff until the receiver answers 2xx or the attempts run out. Every delivery is a
`WebhookDelivery` row: status, attempts, the last response code or error.

- **Signature**: `X-LangHost-Signature: sha256=<hex>`, HMAC-SHA256 with the project's secret
  over `<timestamp>.<body>`, the timestamp in `X-LangHost-Timestamp` (seconds): a receiver
  checks both, and refuses an old timestamp.
- **Only public addresses** (no loopback, private, shared (100.64.0.0/10, where cloud metadata
  lives), link-local or reserved one) are called, checked when the URL is given and again
  when it is called, and the connection goes to the address checked, not to what the name
  resolves to a moment later; unless `LANGHOST_WEBHOOK_ALLOW_PRIVATE` is set.
- **Exactly once across processes**: a delivery is claimed by an update only one process
  wins (its next attempt moved past the call's time-out) before it is sent.
"""

import hashlib
import hmac
import ipaddress
import json
import logging
import secrets
import socket
import time
from datetime import timedelta
from urllib.parse import urlsplit

import httpx
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import IntegrityError
from django.utils import timezone

from runners.providers.secrets import decrypt, encrypt
from runners.webhooks.models import ProjectWebhook, WebhookDelivery

logger = logging.getLogger(__name__)

SECRET_LABEL = b"langhost.webhook.secret"
Status = WebhookDelivery.Status


class WebhookError(ValueError):
    pass


def check_url(url: str) -> str:
    """`url` if LangHost may POST to it; WebhookError naming why not."""
    checked_address(url)
    return url


def checked_address(url: str) -> str | None:
    """The address LangHost POSTs to for `url`, checked: a global one (no private, shared,
    loopback, link-local or reserved address, unless `LANGHOST_WEBHOOK_ALLOW_PRIVATE`; then
    None: the name is resolved when connecting). WebhookError naming why not."""
    try:
        parts = urlsplit(url or "")
        port = parts.port  # parsed on access: out of range or not a number raises
    except ValueError as exc:
        raise WebhookError(f"a webhook is an http(s) URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise WebhookError("a webhook is an http(s) URL")
    if settings.LANGHOST_WEBHOOK_ALLOW_PRIVATE:
        return None
    try:
        found = socket.getaddrinfo(parts.hostname, port or 443, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as exc:  # a label too long to encode: UnicodeError
        raise WebhookError(f"{parts.hostname} does not resolve: {exc}") from None
    addresses = [ipaddress.ip_address(address[0].partition("%")[0]) for *_, address in found]
    for ip in addresses:
        embedded = [getattr(ip, name, None) for name in ("ipv4_mapped", "sixtofour")]
        if not ip.is_global or ip.is_multicast or any(
                inner is not None and not inner.is_global for inner in embedded):
            raise WebhookError(f"{parts.hostname} is not a public address ({ip}); "
                               "LANGHOST_WEBHOOK_ALLOW_PRIVATE allows those")
    return str(addresses[0])


def _pinned(url: str, address: str | None) -> tuple[str, dict, dict]:
    """`(url, headers, extensions)` that connect to the address that was checked, not to
    whatever the name resolves to by then (DNS rebinding), with the name still the Host and
    the TLS server name."""
    if address is None:
        return url, {}, {}
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    credentials = parts.netloc.rpartition("@")[0]
    netloc = (f"{credentials}@" if credentials else "") + (
        f"[{address}]" if ":" in address else address) + port
    name = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    headers = {"Host": name + port}
    return (parts._replace(netloc=netloc).geturl(), headers,
            {"sni_hostname": parts.hostname} if parts.scheme == "https" else {})


def _webhook_of(project_id: str) -> ProjectWebhook:
    webhook = ProjectWebhook.objects.filter(project_id=project_id).first()
    if webhook is None:
        try:
            webhook = ProjectWebhook.objects.create(
                project_id=project_id, secret=encrypt(secrets.token_urlsafe(32), SECRET_LABEL))
        except IntegrityError:  # made at the same moment elsewhere
            webhook = ProjectWebhook.objects.get(project_id=project_id)
    return webhook


def rotate_secret(project_id: str) -> str:
    """A new signing secret for the project's deliveries: returned this once."""
    webhook = _webhook_of(project_id)
    secret = secrets.token_urlsafe(32)
    webhook.secret = encrypt(secret, SECRET_LABEL)
    webhook.save(update_fields=["secret", "updated_at"])
    return secret


def set_url(project_id: str, url: str) -> ProjectWebhook:
    webhook = _webhook_of(project_id)
    webhook.url = check_url(url) if url else ""
    webhook.save(update_fields=["url", "updated_at"])
    return webhook


def sign(secret: str, timestamp: int, body: bytes) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"sha256={digest.hexdigest()}"


def queue(outcome: dict, project_id: str, urls: list[str]) -> int:
    """A pending delivery of `outcome` to each URL (once per run and URL); how many new."""
    made = 0
    for url in dict.fromkeys(url for url in urls if url):
        try:
            WebhookDelivery.objects.create(
                run_id=outcome["run_id"], project_id=project_id or "", url=url,
                body=json.loads(json.dumps(outcome, default=str)),
                next_attempt_at=timezone.now())
            made += 1
        except IntegrityError:  # this run's outcome is on its way there already
            continue
    return made


def project_url(project_id: str) -> str:
    return ProjectWebhook.objects.filter(project_id=project_id).values_list(
        "url", flat=True).first() or ""


def _claim() -> WebhookDelivery | None:
    """The oldest due delivery, now this process's to send (for the length of one call)."""
    now = timezone.now()
    for delivery in WebhookDelivery.objects.filter(
            status=Status.PENDING, next_attempt_at__lte=now).order_by("next_attempt_at")[:10]:
        claimed = WebhookDelivery.objects.filter(
            pk=delivery.pk, status=Status.PENDING,
            next_attempt_at=delivery.next_attempt_at).update(
            next_attempt_at=now + timedelta(seconds=settings.LANGHOST_WEBHOOK_TIMEOUT_SECONDS * 2))
        if claimed:
            return delivery
    return None


def _ended(delivery: WebhookDelivery, code: int | None, error: str) -> None:
    delivery.attempts += 1
    delivery.last_status_code, delivery.last_error = code, error[:2000]
    if code is not None and 200 <= code < 300:
        delivery.status, delivery.delivered_at = Status.DELIVERED, timezone.now()
    elif delivery.attempts >= settings.LANGHOST_WEBHOOK_ATTEMPTS:
        delivery.status = Status.FAILED
    else:
        backoff = settings.LANGHOST_WEBHOOK_BACKOFF_SECONDS * 2 ** (delivery.attempts - 1)
        delivery.next_attempt_at = timezone.now() + timedelta(seconds=backoff)
    delivery.save(update_fields=["attempts", "last_status_code", "last_error", "status",
                                 "delivered_at", "next_attempt_at"])


def _request(delivery: WebhookDelivery) -> tuple[bytes, dict]:
    secret = decrypt(_webhook_of(delivery.project_id).secret, SECRET_LABEL) \
        if delivery.project_id else ""
    body = json.dumps(delivery.body, separators=(",", ":")).encode()
    timestamp = int(time.time())
    return body, {"Content-Type": "application/json", "X-LangHost-Timestamp": str(timestamp),
                  "X-LangHost-Signature": sign(secret, timestamp, body),
                  "X-LangHost-Delivery": str(delivery.pk)}


async def deliver_due() -> int:
    """Send every delivery due now, one at a time; how many were sent (answered or not)."""
    sent = 0
    while (delivery := await sync_to_async(_claim)()) is not None:
        code, error = None, ""
        try:
            address = await sync_to_async(checked_address)(delivery.url)
            body, headers = await sync_to_async(_request)(delivery)
            url, host, extensions = _pinned(delivery.url, address)
            async with httpx.AsyncClient(timeout=settings.LANGHOST_WEBHOOK_TIMEOUT_SECONDS,
                                         follow_redirects=False) as client:
                response = await client.post(url, content=body, headers={**headers, **host},
                                             extensions=extensions)
            code = response.status_code
            if code >= 300:
                error = f"answered {code}"
        except (WebhookError, httpx.HTTPError) as exc:
            error = f"{type(exc).__name__}: {exc}"
        await sync_to_async(_ended)(delivery, code, error)
        if error:
            logger.warning("webhook delivery %s to %s: %s", delivery.pk, delivery.url, error)
        sent += 1
    return sent


def queue_for_run(outcome: dict, project_id: str, *urls: str) -> int:
    """The run's deliveries: the URLs it was given (its own, its agent type's) and its
    project's."""
    return queue(outcome, project_id, [*urls, project_url(project_id) if project_id else ""])
