"""What a runner receives of a message's files, and the links it reads them through.

Each attachment saved as a conversation artifact reaches the runner with:
- `content`: the file inline, as a data URL, when it is small (LANGHOST_ATTACHMENT_INLINE_BYTES);
- `url`: a link signed for this run only. LangHost serves it without the user's credentials
  while the run is active, for LANGHOST_ATTACHMENT_URL_SECONDS at most; after the run ends
  (410), for another run, expired or altered (404), it is refused.

The link's origin is the one the message came in through (the attachment's own URL), else
LANGHOST_PUBLIC_URL; without either, the runner gets the file inline only. With the box
granted to the run, the files are copied into the conversation's workspace before the runner
starts, and each attachment names its `path` there (`/workspace/inbox/<name>`).
"""

import base64
from urllib.parse import parse_qs, quote, urlsplit

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core import signing

from ledger.models import RunStatus
from ledger.selectors import conversations as conversation_selectors
from ledger.selectors import runs as run_selectors
from ledger.services.artifacts import ArtifactNotFound, OpenedArtifact, artifacts
from runners.box import services as box_services
from runners.protocol import AgentEventEnvelope

SALT = "langhost.run-attachment"
ARTIFACT_REF = "artifact:"
ACTIVE = (RunStatus.QUEUED, RunStatus.RUNNING)


class AttachmentRefused(Exception):
    """`status`: 404 (no link of this run: a bad, foreign or expired token, or a file gone),
    410 (the run ended)."""

    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.status = status


def _version_of(url: str | None) -> int | None:
    versions = parse_qs(urlsplit(url or "").query).get("version") or []
    return int(versions[0]) if versions and versions[0].isdigit() else None


def _origin(url: str | None) -> str:
    parts = urlsplit(url or "")
    if parts.scheme in ("http", "https") and parts.netloc:
        return f"{parts.scheme}://{parts.netloc}"
    return (settings.LANGHOST_PUBLIC_URL or "").rstrip("/")


def link(origin: str, run_id: str, scope: tuple[str, str, str], name: str,
         version: int | None) -> str:
    token = signing.dumps({"r": run_id, "s": list(scope), "n": name, "v": version}, salt=SALT,
                          compress=True)
    return f"{origin}/api/v1/runs/{quote(run_id, safe='')}/attachments/{token}"


async def for_runner(event: AgentEventEnvelope, run_id: str, box: bool = False) -> dict:
    """The run's input as its runner receives it: saved attachments with `content` (small
    ones) and a run-scoped `url`; with the box granted, copied into the conversation's
    workspace first (their `path`)."""
    given = event.input.model_dump(exclude_none=True)
    saved = [a for a in given.get("attachments") or []
             if (a.get("ref") or "").startswith(ARTIFACT_REF)]
    if saved and event.conversation_id:
        await sync_to_async(_with_links)(saved, event.conversation_id, run_id, box)
    return given


def _with_links(saved: list[dict], conversation_id: str, run_id: str, box: bool) -> None:
    scope = conversation_selectors.owner_of(conversation_id)
    if scope is None:
        return
    scope = (str(scope[0]), str(scope[1]), conversation_id)
    if box:
        workspace = box_services.Workspace(project_id=scope[0], conversation_id=conversation_id)
        paths = {item["id"]: item["path"]
                 for item in box_services.import_attachments(workspace, scope, saved)}
        for attachment in saved:
            if attachment["ref"] in paths:
                attachment["path"] = paths[attachment["ref"]]
    for attachment in saved:
        name, version = attachment["ref"][len(ARTIFACT_REF):], _version_of(attachment.get("url"))
        origin = _origin(attachment.get("url"))
        attachment.pop("url", None)  # the user's own link: it needs their credentials
        if origin:
            attachment["url"] = link(origin, run_id, scope, name, version)
        if (attachment.get("size") or 0) <= settings.LANGHOST_ATTACHMENT_INLINE_BYTES:
            try:
                loaded = artifacts.load(*scope, name, version)
            except ArtifactNotFound:
                continue
            encoded = base64.b64encode(loaded.data).decode()
            attachment["content"] = f"data:{loaded.info.mime_type};base64,{encoded}"


def opened(run_id: str, token: str) -> OpenedArtifact:
    """The file a run's signed link names, open for reading; AttachmentRefused otherwise."""
    try:
        claim = signing.loads(token, salt=SALT, max_age=settings.LANGHOST_ATTACHMENT_URL_SECONDS)
    except signing.SignatureExpired:
        raise AttachmentRefused(404, "This link has expired.") from None
    except signing.BadSignature:
        raise AttachmentRefused(404, "This link is not valid.") from None
    if claim.get("r") != run_id:
        raise AttachmentRefused(404, "This link is not one of this run's.")
    status = run_selectors.status_of(run_id)
    if status not in ACTIVE:
        raise AttachmentRefused(410, "The run this link belongs to has ended.")
    try:
        return artifacts.open(*claim["s"], claim["n"], claim.get("v"))
    except ArtifactNotFound as exc:
        raise AttachmentRefused(404, str(exc)) from None
