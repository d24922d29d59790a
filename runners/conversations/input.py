"""A message's input: its parts, with inline files saved as conversation artifacts."""

import base64
import logging
import uuid
from dataclasses import dataclass

from ledger.services.artifacts import artifacts

logger = logging.getLogger(__name__)

# ADK Go's exact text (no final period).
UPLOADED_FILE_TEXT = "Uploaded file: {name}. It has been saved to the artifacts"


def new_invocation_id() -> str:
    return f"e-{uuid.uuid4()}"


@dataclass
class Part:
    """One part of an incoming message: text, inline bytes, or a URL."""

    text: str | None = None
    data: bytes | None = None
    url: str | None = None
    name: str = ""
    mime_type: str = "application/octet-stream"

    @property
    def kind(self) -> str:
        return "image" if self.mime_type.startswith("image/") else "file"


class InputFileError(Exception):
    """An input file could not be saved as an artifact; nothing of the message was written."""


@dataclass(frozen=True)
class ArtifactScope:
    project_id: str
    user_id: str
    conversation_id: str


def build_input(parts: list[Part], *, invocation_id: str, save_blobs: bool,
                scope: ArtifactScope, url_for=None) -> dict:
    """The event input (`text`, `contents`, `attachments`) for a message's parts.

    With `save_blobs`, the inline part at position `i` is saved as artifact
    `artifact_<invocation_id>_<i>` and replaced by the `Uploaded file: ...` text; its attachment
    carries the artifact reference. Other parts keep their order. If a save fails, the artifacts
    saved so far are removed and InputFileError is raised.
    """
    contents, attachments, saved = [], [], []
    try:
        for index, part in enumerate(parts):
            if part.text is not None:
                contents.append({"type": "text", "text": part.text})
            elif part.url is not None:
                contents.append({"type": "image_url", "image_url": {"url": part.url}}
                                if part.kind == "image" else
                                {"type": "file_url", "file_url": part.url, "file_name": part.name})
                attachments.append({"type": part.kind, "mime_type": part.mime_type,
                                    "name": part.name or None, "source": "url", "url": part.url})
            elif save_blobs:
                name = f"artifact_{invocation_id}_{index}"
                try:
                    version = artifacts.save(
                        scope.project_id, scope.user_id, scope.conversation_id, name,
                        data=part.data, mime_type=part.mime_type,
                        custom_metadata={"file_name": part.name, "invocation_id": invocation_id},
                    )
                except Exception as exc:
                    logger.exception("failed to save artifact %s", name)
                    raise InputFileError(f"failed to save artifact {name}: {exc}") from exc
                saved.append(name)
                contents.append({"type": "text", "text": UPLOADED_FILE_TEXT.format(name=name)})
                attachments.append({
                    "ref": f"artifact:{name}", "id": name, "type": part.kind,
                    "mime_type": part.mime_type, "size": len(part.data), "name": part.name or name,
                    "source": "artifact", "url": url_for(name, version) if url_for else None,
                })
            else:
                encoded = base64.b64encode(part.data).decode()
                contents.append(
                    {"type": "image_base64", "image_base64": f"data:{part.mime_type};base64,{encoded}"}
                    if part.kind == "image" else
                    {"type": "file_base64", "file_base64": encoded, "file_name": part.name})
                attachments.append({"type": part.kind, "mime_type": part.mime_type,
                                    "size": len(part.data), "name": part.name or None,
                                    "source": "base64"})
    except InputFileError:
        for name in saved:
            artifacts.delete(scope.project_id, scope.user_id, scope.conversation_id, name)
        raise
    # The text parts, the uploads' placeholders among them, as one text (as the SDK's
    # `RunnerInput.to_text` joins them).
    texts = [part["text"] for part in contents if part["type"] == "text"]
    return {"text": " ".join(texts) if texts else None, "contents": contents,
            "attachments": [{k: v for k, v in a.items() if v is not None} for a in attachments]}
