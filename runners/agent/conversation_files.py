"""The built-in LLM agent's files: the conversation's artifacts (the message uploads saved as
`artifact_<invocation>_<n>`, and what runners saved), read as ADK's load-artifacts tool reads
them.

- Images a user sent reach a model with the `vision` ability as image parts of their message
  (the newest MAX_IMAGES, each at most MAX_IMAGE_BYTES).
- Any model is offered `load_artifact(name, version?)` while the conversation has files: text,
  Markdown, CSV, JSON and a PDF's text come back (at most MAX_TEXT_CHARS characters) with the
  file's name, version, type, size and sha256; the call is a tool call of the run.
"""

import base64
from dataclasses import dataclass

from asgiref.sync import sync_to_async

from ledger.selectors import conversations as conversation_selectors
from ledger.services.artifacts import ArtifactError, ArtifactNotFound, artifacts
from runners.knowledge import parsing

LOAD_TOOL = "load_artifact"
MAX_IMAGES = 8
MAX_IMAGE_BYTES = 5 * 1024 * 1024
MAX_TEXT_CHARS = 20_000
MAX_LISTED = 50
VISION = "vision"


@dataclass(frozen=True)
class ConversationFiles:
    project_id: str
    user_id: str
    conversation_id: str
    names: tuple[str, ...]

    @classmethod
    async def for_run(cls, context: dict) -> "ConversationFiles | None":
        conversation_id = (context.get("conversation") or {}).get("conversation_id")
        if not conversation_id:
            return None
        scope = await conversation_selectors.aowner_of(conversation_id)
        if scope is None or not scope[1]:
            return None
        project_id, user_id = str(scope[0]), str(scope[1])
        names = await sync_to_async(artifacts.list_names)(project_id, user_id, conversation_id)
        return cls(project_id, user_id, conversation_id, tuple(names))

    def tool(self) -> dict:
        listed = ", ".join(self.names[:MAX_LISTED])
        more = f" and {len(self.names) - MAX_LISTED} more" if len(self.names) > MAX_LISTED else ""
        return {"name": LOAD_TOOL,
                "description": f"Read a file of this conversation ({listed}{more}): its text "
                               "(text, Markdown, CSV, JSON, PDF), with its type, size and "
                               "sha256.",
                "parameters": {"type": "object", "required": ["name"], "properties": {
                    "name": {"type": "string", "description": "The file's name."},
                    "version": {"type": "integer", "minimum": 1,
                                "description": "A version (the latest if left out)."}}}}

    async def image_parts(self, attachment_refs: list[dict]) -> list[dict]:
        """The images among a message's attachments, as image parts for a vision model."""
        parts = []
        for attachment in attachment_refs or []:
            name = attachment.get("id")
            if (attachment.get("source") != "artifact" or attachment.get("type") != "image"
                    or not name or (attachment.get("size") or 0) > MAX_IMAGE_BYTES):
                continue
            try:
                loaded = await sync_to_async(artifacts.load)(
                    self.project_id, self.user_id, self.conversation_id, name)
            except ArtifactNotFound:
                continue
            encoded = base64.b64encode(loaded.data).decode()
            parts.append({"type": "image_base64",
                          "image_base64": f"data:{loaded.info.mime_type};base64,{encoded}"})
        return parts

    async def load(self, args: dict) -> tuple[dict, str]:
        """`(recorded result, what the model reads)` for a `load_artifact` call; raises
        ArtifactError (a missing file too) with what to tell the model."""
        name, version = args.get("name"), args.get("version")
        if not isinstance(name, str) or not name:
            raise ArtifactError("load_artifact needs `name`, a file's name")
        if version is not None and (not isinstance(version, int) or version < 1):
            raise ArtifactError("`version` must be a positive integer")
        try:
            loaded = await sync_to_async(artifacts.load)(
                self.project_id, self.user_id, self.conversation_id, name, version)
        except ArtifactNotFound as exc:
            raise ArtifactError(f"{exc} The conversation's files: "
                                f"{', '.join(self.names[:MAX_LISTED])}.") from None
        info = loaded.info
        mime_type = parsing.mime_type_of(info.custom_metadata.get("file_name") or name,
                                         info.mime_type, loaded.data[:8])
        try:
            found = await sync_to_async(parsing.passages)(loaded.data, mime_type)
        except parsing.UnreadableDocument as exc:
            raise ArtifactError(f"{name} cannot be read as text: {exc}") from None
        text = "\n\n".join(passage.text for passage in found)
        cut = len(text) > MAX_TEXT_CHARS
        recorded = {"name": name, "version": info.version, "mime_type": info.mime_type,
                    "size": info.size, "sha256": info.sha256, "truncated": cut}
        header = (f"{name} (version {info.version}, {info.mime_type}, {info.size} bytes, "
                  f"sha256 {info.sha256})")
        shown = text[:MAX_TEXT_CHARS] + (f"\n[cut at {MAX_TEXT_CHARS} characters]" if cut else "")
        return recorded, f"{header}:\n{shown}"
