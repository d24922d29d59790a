"""Files a runner puts in its reply: each inline file of a `message.completed` (a
`file_base64` or `image_base64` element) is saved as a version of a conversation artifact,
and the element becomes a `file_url` naming the artifact's download link
(`/api/v1/projects/{project}/agents/{agent}/conversations/{conversation}/artifacts/{name}
?version=N`, read with the user's credentials), so the transcript keeps a link, not the
bytes. The files its `file_ids` name (`artifact:<name>`, as `export_box_files` answers) join
the reply as links too. A reply outside a conversation keeps its files inline.
"""

import base64
import binascii
from urllib.parse import quote

from asgiref.sync import sync_to_async

from ledger.selectors import conversations as conversation_selectors
from ledger.services.artifacts import (
    ArtifactError,
    ArtifactNotFound,
    artifacts,
    conversation_file,
)

INLINE_TYPES = ("file_base64", "image_base64")
ARTIFACT_REF = "artifact:"


def _has_files(message: dict) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(part, dict) and part.get("type") in INLINE_TYPES for part in content)


async def saved(message: dict, conversation_id: str | None, run_id: str,
                file_ids: list[str] = ()) -> dict:
    """The reply with its inline files saved as artifacts, and the files `file_ids` name,
    named by their links."""
    if not conversation_id or not (_has_files(message) or file_ids):
        return message
    return await sync_to_async(_saved)(message, conversation_id, run_id, list(file_ids))


def _decoded(part: dict) -> tuple[bytes, str]:
    raw = part.get(part["type"]) or ""
    header, _, encoded = raw.partition("base64,") if raw.startswith("data:") else ("", "", raw)
    mime_type = header[5:].rstrip(";") or ("image/png" if part["type"] == "image_base64"
                                           else "application/octet-stream")
    return base64.b64decode(encoded, validate=True), mime_type


def _saved(message: dict, conversation_id: str, run_id: str, file_ids: list[str]) -> dict:
    conversation = conversation_selectors.by_ledger_id(conversation_id)
    if conversation is None:
        return message
    base = (f"/api/v1/projects/{conversation.project_id}/agents/{conversation.agent_id}/"
            f"conversations/{quote(conversation.client_id, safe='')}/artifacts")
    given = message.get("content")
    parts = given if isinstance(given, list) else (
        [{"type": "text", "text": given}] if given else [])
    content = []
    for index, part in enumerate(parts):
        if not isinstance(part, dict) or part.get("type") not in INLINE_TYPES:
            content.append(part)
            continue
        name = conversation_file(
            (part.get("file_name") or f"reply_{run_id}_{index}").replace("/", "_"))
        try:
            data, mime_type = _decoded(part)
            version = artifacts.save(conversation.project_id, conversation.user_id,
                                     conversation_id, name, data=data, mime_type=mime_type,
                                     custom_metadata={"file_name": name, "run_id": run_id})
        except (binascii.Error, ValueError, ArtifactError) as exc:
            content.append({"type": "text", "text": f"[{name} could not be saved: {exc}]"})
            continue
        content.append({"type": "file_url", "file_name": name,
                        "file_url": f"{base}/{quote(name, safe='')}?version={version}"})
    for file_id in file_ids:
        name = file_id.removeprefix(ARTIFACT_REF)
        try:
            info = artifacts.metadata(conversation.project_id, conversation.user_id,
                                      conversation_id, name)
        except (ArtifactNotFound, ArtifactError):
            content.append({"type": "text", "text": f"[{file_id}: no such file]"})
            continue
        content.append({"type": "file_url", "file_name": name,
                        "file_url": f"{base}/{quote(name, safe='')}?version={info.version}"})
    return {**message, "content": content}
