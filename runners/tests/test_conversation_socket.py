"""`ws/conversations/<id>/`: the same rules and frames as the REST message endpoint."""

import json

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from accounts.tokens import token_pair
from langhost.asgi import application
from ledger.models import AgentRun
from ledger.services import conversations
from runners.ws.consumers import origin_of
from tests.timing import scaled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]


@pytest.fixture
def conversation(agent, user):
    """`user`'s conversation with the idle agent `Ada` (its type runs the built-in echo)."""
    return conversations.create(project_id=str(agent.project_id), agent_id=str(agent.pk),
                                user_id=str(user.pk))


async def connect(conversation, who) -> WebsocketCommunicator:
    token = await sync_to_async(lambda: token_pair(who)["access_token"])()
    socket = WebsocketCommunicator(
        application, f"/ws/conversations/{conversation.conversation_id}/?token={token}")
    connected, _ = await socket.connect(timeout=scaled(1))
    assert connected
    return socket


async def frames_until(socket, last_type: str) -> list[dict]:
    frames = []
    while not frames or frames[-1].get("type") != last_type:
        frames.append(json.loads(await socket.receive_from(timeout=scaled(10))))
    return frames


async def test_a_message_streams_the_reply_and_ends_with_the_outcome(conversation, user, agent):
    socket = await connect(conversation, user)
    assert (await socket.receive_json_from(timeout=scaled(1)))["type"] == "ready"

    await socket.send_json_to({"type": "message", "text": "over the socket"})
    frames = await frames_until(socket, "run.finished")
    await socket.disconnect()

    replies = [f for f in frames if f["type"] == "message.completed"]
    assert replies[0]["data"]["message"]["content"] == "echo: over the socket"
    assert frames[-1]["status"] == "completed"
    assert frames[-1]["agent"] == agent.agent_type.name  # the answering node of its tree
    assert frames[-1]["reply"] == {"role": "assistant", "content": "echo: over the socket"}
    run = await AgentRun.objects.aget(run_id=frames[-1]["run_id"])
    assert run.conversation_id == conversation.conversation_id


async def test_a_paused_agent_refuses_the_message_with_409(conversation, user, agent):
    await sync_to_async(agent.transition)("pause")
    socket = await connect(conversation, user)
    await socket.receive_json_from(timeout=scaled(1))

    await socket.send_json_to({"type": "message", "text": "hello?"})
    error = await socket.receive_json_from(timeout=scaled(1))
    await socket.disconnect()

    assert (error["type"], error["status"]) == ("error", 409)
    assert "paused" in error["detail"]
    assert not await AgentRun.objects.aexists()


async def test_an_empty_message_is_refused_with_400(conversation, user):
    socket = await connect(conversation, user)
    await socket.receive_json_from(timeout=scaled(1))

    await socket.send_json_to({"type": "message", "text": "   "})
    error = await socket.receive_json_from(timeout=scaled(1))
    await socket.disconnect()

    assert error["status"] == 400


async def test_someone_elses_conversation_is_closed_with_4404(conversation, outsider):
    token = await sync_to_async(lambda: token_pair(outsider)["access_token"])()
    socket = WebsocketCommunicator(
        application, f"/ws/conversations/{conversation.conversation_id}/?token={token}")
    await socket.connect(timeout=scaled(1))

    assert (await socket.receive_output(timeout=scaled(5)))["code"] == 4404


async def test_a_frame_nested_too_deeply_is_refused_and_the_socket_stays_open(conversation,
                                                                               user):
    socket = await connect(conversation, user)
    await socket.receive_json_from(timeout=scaled(1))

    await socket.send_to(text_data="[" * 100_000 + "]" * 100_000)
    refused = await socket.receive_json_from(timeout=scaled(5))
    await socket.send_json_to({"type": "message", "text": "still here"})
    frames = await frames_until(socket, "run.finished")
    await socket.disconnect()

    assert refused == {"type": "error", "status": 400, "detail": "Frames are JSON objects."}
    assert frames[-1]["status"] == "completed"


def test_a_sockets_files_get_links_on_the_origin_it_was_opened_on():
    assert origin_of({"scheme": "ws", "headers": [(b"host", b"lh.example:8000")]}) == (
        "http://lh.example:8000")
    assert origin_of({"scheme": "wss", "headers": [(b"host", b"lh.example")]}) == (
        "https://lh.example")
    assert origin_of({"scheme": "ws", "headers": []}) == ""  # then LANGHOST_PUBLIC_URL
