"""Talking to an agent instance: pick the answering agent of its tree, keep uploaded files out
of the transcript (saved as artifacts), and run the agent through the orchestrator.

The HTTP side lives in `conversation_views`; this module holds the steps it strings together.
"""

import base64
import json
import logging
import uuid
from contextlib import aclosing
from dataclasses import dataclass

from asgiref.sync import sync_to_async
from django.utils import timezone

from ledger.models import AgentRun, RunStatus, Transcript
from ledger.selectors import runs as readers
from ledger.services import conversations
from ledger.services.artifacts import artifacts
from ledger.services.conversations import StateIdentity
from runners.catalogue.agent_routing import AgentNode, AgentTree, Entry, find_agent_to_run
from runners.catalogue.trees import build_tree
from runners.execution.agents import agent_binding_sync, agent_runner_config
from runners.execution.orchestrator import Orchestrator, RunRefused
from runners.execution.protocol import AgentBinding
from runners.models import AgentInstance, AgentType
from runners.plugins.gateway import get_gateway

logger = logging.getLogger(__name__)

# ADK Go's exact text (no final period).
UPLOADED_FILE_TEXT = "Uploaded file: {name}. It has been saved to the artifacts"
HISTORY_LIMIT = 500


def new_invocation_id() -> str:
    return f"e-{uuid.uuid4()}"


# --- routing ------------------------------------------------------------------------------

def entry_for(author: str, role: str, content_json) -> Entry:
    """What routing needs from one transcript entry: its author and function call ids."""
    message = content_json if isinstance(content_json, dict) else {}
    calls = [call.get("id") for call in message.get("tool_calls") or []
             if isinstance(call, dict) and call.get("id")]
    responses = [message["tool_call_id"]] if role == "tool" and message.get("tool_call_id") else []
    for part in message.get("contents") or []:
        if isinstance(part, dict) and part.get("id"):
            if part.get("type") == "function_call":
                calls.append(part["id"])
            elif part.get("type") == "function_response":
                responses.append(part["id"])
    return Entry(author=author or "", function_calls=tuple(calls),
                 function_responses=tuple(responses))


def history(conversation_id: str) -> list[Entry]:
    """The conversation's recent entries, oldest first, as routing reads them."""
    rows = (Transcript.objects.filter(conversation_id=conversation_id).order_by("-id")
            .values_list("author", "role", "content_json")[:HISTORY_LIMIT])
    return [entry_for(*row) for row in reversed(rows)]


def route(agent: AgentInstance, conversation_id: str) -> tuple[AgentTree, AgentNode]:
    """The agent of the instance's tree that answers the next message (TreeError if the stored
    tree is invalid)."""
    tree = build_tree(agent.agent_type)
    return tree, find_agent_to_run(tree, history(conversation_id))


def node_binding(agent: AgentInstance, node: AgentNode, timeout: float | None = None) -> AgentBinding:
    """The root runs with the instance's binding; a sub-agent with the same binding identity
    and policies, and its own type's runner and config."""
    binding = agent_binding_sync(agent, timeout)
    if node.type_id is None or node.type_id == str(agent.agent_type_id):
        return binding
    node_type = AgentType.objects.get(pk=node.type_id)
    config = agent_runner_config(node_type)
    if timeout is not None:
        config["timeout"] = timeout
    return binding.model_copy(update={"runner_id": node_type.runner_id, "runner_config": config})


def state_identity(agent: AgentInstance) -> StateIdentity:
    """The runner state a conversation with this agent reads and writes (its root binding)."""
    binding = agent_binding_sync(agent)
    return StateIdentity(runner_id=binding.runner_id, binding_identity=binding.binding_id)


# --- input --------------------------------------------------------------------------------

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
    texts = [part.text for part in parts if part.text is not None]
    return {"text": texts[0] if texts else None, "contents": contents,
            "attachments": [{k: v for k, v in a.items() if v is not None} for a in attachments]}


# --- the run ------------------------------------------------------------------------------

@sync_to_async
def _mark_working(agent_pk) -> None:
    AgentInstance.objects.filter(
        pk=agent_pk, status__in=[AgentInstance.Status.IDLE, AgentInstance.Status.WORKING]
    ).update(status=AgentInstance.Status.WORKING, updated_at=timezone.now())


@sync_to_async
def _after_run(agent_pk, conversation_id: str) -> None:
    """Back to idle unless another run of the agent is still going; the conversation moved."""
    busy = AgentRun.objects.filter(
        agent_id=str(agent_pk), status__in=[RunStatus.QUEUED, RunStatus.RUNNING]).exists()
    if not busy:
        AgentInstance.objects.filter(pk=agent_pk, status=AgentInstance.Status.WORKING).update(
            status=AgentInstance.Status.IDLE, updated_at=timezone.now())
    conversations.touch(conversation_id)


def reply_of(message_data: dict | None) -> dict | None:
    message = (message_data or {}).get("message")
    if not isinstance(message, dict):
        return None
    return {"role": message.get("role") or "assistant", "content": message.get("content")}


def outcome_body(outcome: dict, agent_name: str, reply: dict | None) -> dict:
    return {"run_id": outcome.get("run_id"), "agent": agent_name, "status": outcome.get("status"),
            "status_reason": outcome.get("status_reason") or "", "reply": reply,
            "usage": outcome.get("usage"), "conversation_id": outcome.get("conversation_id"),
            "event_id": outcome.get("event_id")}


def ndjson(frame: dict) -> str:
    return json.dumps(frame, default=str) + "\n"


async def message_body(*, event, binding: AgentBinding, run_id: str, agent_pk, agent_name: str,
                       stream: bool):
    """The response body of a message: the agent is `working` while it runs, then `idle`
    (also when the run fails or the client goes away)."""
    await _mark_working(agent_pk)
    try:
        orchestrator = Orchestrator(get_gateway())
        reply = None
        if stream:
            yield ndjson({"type": "run.started", "run_id": run_id, "agent": agent_name,
                          "event_id": event.event_id})
        async with aclosing(orchestrator.run(event, binding, run_id=run_id,
                                             agent_name=agent_name)) as messages:
            async for message in messages:
                if message.type == "message.completed":
                    reply = reply_of(message.data) or reply
                if stream:
                    yield ndjson(message.as_dict())
        outcome = outcome_body(await readers.run_outcome_for_event(event.event_id), agent_name,
                               reply)
        yield ndjson({"type": "run.finished", **outcome}) if stream else json.dumps(outcome,
                                                                                   default=str)
    except RunRefused as exc:
        frame = {"type": "run.refused", "agent": agent_name, "detail": str(exc)}
        yield ndjson(frame) if stream else json.dumps(frame)
    finally:
        await _after_run(agent_pk, event.conversation_id)
