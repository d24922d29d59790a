"""The built-in LLM agent reads the files sent to its conversation: a vision model sees the
user's image as an image part of their message; a text-only model asks for a file with
`load_artifact` and reads its text, with its sha256; a file that does not exist is the
model's to handle."""

import base64
import hashlib
import json
import re

import pytest

from ledger.models import AgentRunEvent
from runners.models import LLM_AGENT_RUNNER_ID
from runners.tests.conversation_fixtures import conversations_url, read_body
from tests.fake_providers import Reply

pytestmark = pytest.mark.django_db(transaction=True)

# The smallest PNG there is: one transparent pixel.
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChw"
                       "GA60e6kgAAAABJRU5ErkJggg==")
NOTES = b"Ferry times\n\nThe ferry leaves the north pier at 7:15 and 9:40.\n"


def agent_with(make_agent_type, make_agent, make_model, project, openai_server, abilities):
    make_model(openai_server, "reader-model", abilities=abilities)
    agent_type = make_agent_type(name="Reader", runner_id=LLM_AGENT_RUNNER_ID,
                                 primary_model="reader-model")
    return make_agent(project, agent_type)


def send(client, agent, text, *files) -> dict:
    conversation = client.post(conversations_url(agent), {}, format="json").json()["id"]
    response = client.post(f"{conversations_url(agent)}/{conversation}/messages", {
        "text": text, "attachments": [
            {"name": name, "mime_type": mime_type, "data": base64.b64encode(data).decode()}
            for name, mime_type, data in files]}, format="json")
    return json.loads(read_body(response).decode())


def load_the_uploaded(name_pattern: str):
    """A reply calling `load_artifact` with the file the user's message names."""
    def answer(body: dict) -> Reply:
        said = json.dumps(body["messages"])
        name = re.search(name_pattern, said).group(0)
        return Reply(text="", tool_calls=[{"id": "call-load", "name": "load_artifact",
                                           "arguments": json.dumps({"name": name})}])
    return Reply(answer=answer)


def test_a_vision_model_sees_the_users_image_as_an_image_part(
        user_client, make_agent_type, make_agent, make_model, project, openai_server):
    agent = agent_with(make_agent_type, make_agent, make_model, project, openai_server,
                       ["vision", "streaming"])
    openai_server.script(Reply(text="A transparent pixel."))

    body = send(user_client, agent, "What is in this picture?", ("pixel.png", "image/png", PNG))

    assert body["status"] == "completed", body
    (call,) = openai_server.calls()
    user_message = call.body["messages"][-1]
    images = [part for part in user_message["content"] if part["type"] == "image_url"]
    assert images == [{"type": "image_url", "image_url": {
        "url": f"data:image/png;base64,{base64.b64encode(PNG).decode()}"}}]
    assert "What is in this picture?" in json.dumps(user_message)


def test_a_text_model_loads_the_uploaded_file_and_reads_its_text_and_sha256(
        user_client, make_agent_type, make_agent, make_model, project, openai_server):
    agent = agent_with(make_agent_type, make_agent, make_model, project, openai_server,
                       ["streaming"])
    openai_server.script(load_the_uploaded(r"artifact_e-[0-9a-f-]+_1"),
                         Reply(text="At 7:15 and 9:40."))

    body = send(user_client, agent, "When does the ferry leave?",
                ("ferry.txt", "text/plain", NOTES))

    assert body["status"] == "completed", body
    first, second = openai_server.calls()
    assert "image_url" not in json.dumps(first.body["messages"])
    assert "load_artifact" in {tool["function"]["name"] for tool in first.body["tools"]}
    (tool_message,) = [m for m in second.body["messages"] if m["role"] == "tool"]
    digest = hashlib.sha256(NOTES).hexdigest()
    assert f"sha256 {digest}" in tool_message["content"]
    assert NOTES.decode().strip() in tool_message["content"]
    completed = AgentRunEvent.objects.get(run_id=body["run_id"], type="tool.call.completed")
    assert completed.data_json["result"]["sha256"] == digest
    assert completed.data_json["error"] is None


def test_a_file_that_does_not_exist_is_an_error_the_model_reads(
        user_client, make_agent_type, make_agent, make_model, project, openai_server):
    agent = agent_with(make_agent_type, make_agent, make_model, project, openai_server,
                       ["streaming"])
    openai_server.script(
        Reply(text="", tool_calls=[{"id": "call-load", "name": "load_artifact",
                                    "arguments": '{"name": "no-such-file"}'}]),
        Reply(text="I could not find it."))

    body = send(user_client, agent, "Read my file", ("ferry.txt", "text/plain", NOTES))

    assert body["status"] == "completed"
    (tool_message,) = [m for m in openai_server.calls()[1].body["messages"]
                       if m["role"] == "tool"]
    assert tool_message["content"].startswith("Error: Artifact 'no-such-file' does not exist.")
