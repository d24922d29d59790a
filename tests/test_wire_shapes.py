"""Every door sends a run's frames in the one shape `ledger.wire` defines for each: REST, the
NDJSON stream, the run stream socket (the admin run page's live feed), the conversation
socket; and says an error in one wording."""

import json

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator

from accounts.tokens import token_pair
from langhost.asgi import application
from ledger import wire
from ledger.selectors import runs as readers
from ledger.services import conversations
from runners.tests.test_runs_api import start
from tests.timing import scaled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]


async def socket_for(path: str, who) -> WebsocketCommunicator:
    token = await sync_to_async(lambda: token_pair(who)["access_token"])()
    socket = WebsocketCommunicator(application, f"{path}?token={token}")
    connected, _ = await socket.connect(timeout=scaled(1))
    assert connected
    return socket


async def frames_until(socket, done) -> list[dict]:
    frames = []
    while not frames or not done(frames):
        frames.append(json.loads(await socket.receive_from(timeout=scaled(10))))
    return frames


@pytest.fixture
def conversation(agent, user):
    """`user`'s conversation with the idle agent `Ada` (its type runs the built-in echo)."""
    return conversations.create(project_id=str(agent.project_id), agent_id=str(agent.pk),
                                user_id=str(user.pk))


def test_rest_and_ndjson_send_events_messages_and_outcomes_in_their_one_shape(
        superuser_client):
    streamed = start(superuser_client, {"runner_id": "builtin:echo", "input": {"text": "x"}},
                     stream=True)
    frames = [json.loads(line) for line in streamed.body.decode().splitlines()]
    run_id = frames[0]["run_id"]

    for message in frames[1:-1]:
        wire.RunMessage.model_validate(message)
    events = superuser_client.get(f"/api/v1/runs/{run_id}/events").json()["data"]
    assert [event["type"] for event in events] == ["message.completed", "run.completed"]
    for event in events:
        wire.RunEvent.model_validate(event)
    wire.RunOutcome.model_validate(async_to_sync(readers.run_outcome)(run_id))


async def test_the_run_stream_socket_sends_the_ledgers_events_then_the_status_frame(
        superuser, superuser_client):
    streamed = await sync_to_async(start)(
        superuser_client, {"runner_id": "builtin:echo", "input": {"text": "x"}}, stream=True)
    run_id = json.loads(streamed.body.decode().splitlines()[0])["run_id"]

    socket = await socket_for(f"/ws/runs/{run_id}/", superuser)
    frames = await frames_until(socket, lambda got: got[-1]["type"] == "run.status")
    await socket.disconnect()

    stored = await sync_to_async(
        lambda: superuser_client.get(f"/api/v1/runs/{run_id}/events").json()["data"])()
    assert frames[:-1] == stored  # the same event, byte for byte, live or from REST
    wire.RunStatusFrame.model_validate(frames[-1])
    assert frames[-1]["status"] == "completed"


async def test_the_conversation_socket_forwards_events_and_the_status_frame_whole(
        conversation, user):
    socket = await socket_for(f"/ws/conversations/{conversation.conversation_id}/", user)
    await socket.receive_json_from(timeout=scaled(1))  # ready

    await socket.send_json_to({"type": "message", "text": "over the socket"})
    frames = await frames_until(socket, lambda got: any(
        frame["type"] == "run.status" for frame in got) and any(
        frame["type"] == "run.finished" for frame in got))
    await socket.disconnect()

    events = [frame["event"] for frame in frames if frame["type"] == "run.event"]
    assert [event["type"] for event in events] == ["message.completed", "run.completed"]
    for event in events:
        wire.RunEvent.model_validate(event)
    status = next(frame for frame in frames if frame["type"] == "run.status")
    assert wire.RunStatusFrame.model_validate(status).status == "completed"


async def test_the_conversation_socket_words_a_refusal_as_rest_does(conversation, user,
                                                                    user_client):
    path = (f"/api/v1/projects/{conversation.project_id}/agents/{conversation.agent_id}/"
            f"conversations/{conversation.conversation_id}/messages")
    rest = await sync_to_async(user_client.post)(path, {"text": "   "}, format="json")
    socket = await socket_for(f"/ws/conversations/{conversation.conversation_id}/", user)
    await socket.receive_json_from(timeout=scaled(1))

    await socket.send_json_to({"type": "message", "text": "   "})
    error = await socket.receive_json_from(timeout=scaled(1))
    await socket.disconnect()

    assert error == {"type": "error", "status": rest.status_code, **rest.json()}
    assert "text" in error["errors"]


def test_langbot_says_an_invalid_input_in_rests_words(anon_client):
    langbot = anon_client.post("/api/v1/user/auth", {}, format="json")
    rest = anon_client.post("/api/v1/auth/login", {}, format="json")

    assert langbot.status_code == rest.status_code == 400
    assert langbot.json()["code"] == 1
    assert langbot.json()["msg"].startswith("Invalid input (user, password): ")
    assert rest.json()["detail"].startswith("Invalid input (email, password): ")
