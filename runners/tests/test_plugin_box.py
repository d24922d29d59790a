"""A plugin runner works in its conversation's sandbox box through the SDK (the real runtime,
the SDK's box server): it acquires and binds the box, finds its message's file already in the
workspace, imports it, reads it with the box's tools byte for byte, and exports a file it made
as a conversation artifact, linked from its reply. A run of a type without the box is refused
the box actions."""

import hashlib
import json

import pytest
from asgiref.sync import sync_to_async

from ledger.models import Conversation
from ledger.services.artifacts import artifacts
from runners.box.server import box_server
from runners.conversations.input import Part
from runners.models import AgentInstance, AgentType
from runners.tests.conversation_fixtures import through_the_door

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

BOX_USER = "plugin:e2e/agent-runner-llm/box-user"
NOTES = b"Tide at 7:15.\nFerry at 9:40.\n"
OTHER = b"Another file of the same name.\n"


async def message_with_a_file(user, project, box_enabled: bool) -> tuple[dict, str]:
    """A message with a file to an agent of the box user's type, through the door the
    messages endpoint uses (on this loop: the runtime's host actions need it free)."""
    agent_type = await AgentType.objects.acreate(name="Boxer", slug="boxer", runner_id=BOX_USER,
                                                 box_enabled=box_enabled)
    agent = await AgentInstance.objects.acreate(name="Boxer", project=project,
                                                agent_type=agent_type)
    outcome, conversation = await through_the_door(user, agent, [
        Part(text="work on this"), Part(data=NOTES, name="notes.txt", mime_type="text/plain"),
        Part(data=OTHER, name="notes.txt", mime_type="text/plain")])
    return outcome, conversation.client_id


async def test_a_plugin_runner_works_in_its_box_through_the_sdk(
        llm_plugin_gateway, user, project):
    answer, opened = await message_with_a_file(user, project, box_enabled=True)
    try:
        assert answer["status"] == "completed", answer
        handed_over, final = (message["data"]["message"] for message in answer["messages"]
                              if message["type"] == "message.completed")
        # The box actions it took reach its caller as the SDK reports them: tool calls.
        assert {message["data"]["tool_name"] for message in answer["messages"]
                if message["type"] == "tool.call.started"} >= {"exec", "read_file"}
        (replied,) = handed_over["content"]  # reply_files: the file's link
        assert (replied["type"], replied["file_name"]) == ("file_url", "made.txt")
        said, linked = final["content"]
        report = json.loads(said["text"])
        assert report["status"]["enabled"] and report["status"]["available"]
        assert report["outbox"] == "/workspace/outbox"
        # There before the runner: both, though they share a name.
        assert report["paths"] == ["/workspace/inbox/notes.txt", "/workspace/inbox/2-notes.txt"]
        notes, other = report["imported"]
        digest, other_digest = hashlib.sha256(NOTES).hexdigest(), hashlib.sha256(OTHER).hexdigest()
        assert (notes["name"], notes["read_sha256"], notes["exec_sha256"]) == (
            "notes.txt", digest, digest)
        assert (other["name"], other["read_sha256"]) == ("2-notes.txt", other_digest)
        (made,) = report["exported"]
        assert made["id"] == "artifact:made.txt"
        conversation = await Conversation.objects.aget(client_id=opened)
        saved = await sync_to_async(artifacts.load)(
            conversation.project_id, conversation.user_id, conversation.conversation_id,
            "made.txt")
        assert saved.data == b"made by the box\n"
        assert linked["type"] == "file_url" and linked["file_name"] == "made.txt"
        assert linked["file_url"].endswith(f"/conversations/{opened}/artifacts/made.txt?version=1")
    finally:
        await box_server().stop()


async def test_a_run_without_the_box_is_refused_its_actions(
        llm_plugin_gateway, user, project):
    answer, _ = await message_with_a_file(user, project, box_enabled=False)

    assert answer["status"] == "failed"
    assert "api.not_available" in answer["status_reason"]
