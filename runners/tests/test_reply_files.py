"""A file a runner puts in its reply becomes a version of a conversation artifact: the reply
and the transcript keep its download link, the link answers the file to the conversation's
user, and the conversation page links it."""

import base64
import json

import pytest
from asgiref.sync import sync_to_async

from ledger.models import Artifact, Conversation
from runners.agent.reply_files import _decoded
from runners.models import AgentInstance, AgentType
from runners.tests.conversation_fixtures import read_body

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

FILE_MAKER = "plugin:e2e/agent-runner-llm/file-maker"


@pytest.fixture
async def send(llm_plugin_gateway, user_client, project):
    """Sends a message to a new conversation with a file maker agent: its outcome (the
    conversation's URL is `send.url`)."""
    agent_type = await AgentType.objects.acreate(name="Maker", slug="maker",
                                                 runner_id=FILE_MAKER)
    agent = await AgentInstance.objects.acreate(name="Maker", project=project,
                                                agent_type=agent_type)
    conversations = f"/api/v1/projects/{project.pk}/agents/{agent.pk}/conversations"
    opened = await sync_to_async(user_client.post)(conversations, {}, format="json")

    async def sent(text):
        response = await sync_to_async(user_client.post)(f"{sent.url}/messages",
                                                         {"text": text}, format="json")
        return json.loads(read_body(response))

    sent.url, sent.client_id = f"{conversations}/{opened.json()['id']}", opened.json()["id"]
    return sent


async def test_a_runners_file_is_a_versioned_artifact_linked_from_the_reply(
        send, user_client, admin_browser):
    first = await send("Sales rose by 4%.")
    second = await send("Sales fell by 2%.")

    assert first["status"] == "completed", first
    text, made = first["reply"]["content"]
    assert text == {"type": "text", "text": "Here is your report."}
    assert made["type"] == "file_url" and made["file_name"] == "report.txt"
    assert made["file_url"].startswith(f"{send.url}/artifacts/")
    assert "file_base64" not in json.dumps(first)
    downloaded = await sync_to_async(user_client.get)(made["file_url"])
    assert downloaded.status_code == 200
    assert await sync_to_async(read_body)(downloaded) == b"Sales rose by 4%."
    assert second["reply"]["content"][1]["file_url"].endswith("?version=2")
    conversation = await Conversation.objects.aget(client_id=send.client_id)
    page = await sync_to_async(admin_browser.get)(
        f"/admin/ledger/conversation/{conversation.pk}/change/")
    assert f'href="{made["file_url"]}"' in page.content.decode().replace("&amp;", "&")


async def test_a_runners_file_named_as_the_users_stays_in_its_conversation(send):
    made = (await send("name:user:notes.md\nhi"))["reply"]["content"][1]

    conversation = await Conversation.objects.aget(client_id=send.client_id)
    saved = [(a.name, a.conversation_id) async for a in Artifact.objects.all()]
    assert made["file_name"] == "user_notes.md"
    assert saved == [("user_notes.md", conversation.conversation_id)]


def test_an_inline_file_is_decoded_as_base64_or_a_data_url():
    data = base64.b64encode(b"%PDF-1.4").decode()
    assert _decoded({"type": "file_base64", "file_base64": data}) == (
        b"%PDF-1.4", "application/octet-stream")
    assert _decoded({"type": "image_base64", "image_base64": f"data:image/gif;base64,{data}"}) \
        == (b"%PDF-1.4", "image/gif")
