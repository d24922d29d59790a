"""Revocation everywhere: a token stops working the moment its user changes password, is
deactivated or signs out, in this process, and an open conversation socket stops answering."""

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from accounts.tokens import token_pair
from langhost.asgi import application
from ledger.services import conversations
from tests.timing import scaled

pytestmark = pytest.mark.django_db(transaction=True)

ME = "/api/v1/auth/me"


def me(client, access_token):
    return client.get(ME, HTTP_AUTHORIZATION=f"Bearer {access_token}")


@pytest.mark.parametrize("change", ["password", "deactivated"])
def test_a_token_trusted_a_moment_ago_is_refused_at_once_after_a_change(anon_client, user,
                                                                        change):
    access = token_pair(user)["access_token"]
    assert me(anon_client, access).status_code == 200  # its user is now cached

    if change == "password":
        user.set_password("A-New-Passw0rd-42")
    else:
        user.is_active = False
    user.save()

    assert me(anon_client, access).status_code == 401


def test_signing_out_revokes_the_access_token_it_signs_out_with(anon_client, user):
    tokens = token_pair(user)
    assert me(anon_client, tokens["access_token"]).status_code == 200

    out = anon_client.post("/api/v1/auth/logout", {"refresh_token": tokens["refresh_token"]},
                           format="json", HTTP_AUTHORIZATION=f"Bearer {tokens['access_token']}")

    assert out.status_code == 204
    assert me(anon_client, tokens["access_token"]).status_code == 401
    refreshed = anon_client.post("/api/v1/auth/refresh",
                                 {"refresh_token": tokens["refresh_token"]}, format="json")
    assert refreshed.status_code == 401
    assert me(anon_client, token_pair(user)["access_token"]).status_code == 200  # a new one


@pytest.mark.parametrize("signed_out_with", ["refresh token", "access token"])
def test_signing_out_with_either_token_ends_the_whole_sign_in(anon_client, user,
                                                              signed_out_with):
    tokens = token_pair(user)
    refresh = {"refresh_token": tokens["refresh_token"]}
    issued = anon_client.post("/api/v1/auth/refresh", refresh, format="json").json()
    for access in (tokens["access_token"], issued["access_token"]):
        assert me(anon_client, access).status_code == 200  # trusted, cached

    if signed_out_with == "refresh token":
        out = anon_client.post("/api/v1/auth/logout", refresh, format="json")
    else:
        out = anon_client.post("/api/v1/auth/logout", {}, format="json",
                               HTTP_AUTHORIZATION=f"Bearer {issued['access_token']}")

    assert out.status_code == 204
    assert [me(anon_client, access).status_code
            for access in (tokens["access_token"], issued["access_token"])] == [401, 401]
    assert anon_client.post("/api/v1/auth/refresh", refresh, format="json").status_code == 401


def test_signing_out_needs_a_token_to_sign_out(anon_client):
    out = anon_client.post("/api/v1/auth/logout", {}, format="json")

    assert out.status_code == 400 and "refresh_token" in out.json()["errors"]


@pytest.fixture
def conversation(agent, user):
    return conversations.create(project_id=str(agent.project_id), agent_id=str(agent.pk),
                                user_id=str(user.pk))


async def socket_of(conversation, access_token) -> WebsocketCommunicator:
    socket = WebsocketCommunicator(
        application, f"/ws/conversations/{conversation.conversation_id}/?token={access_token}")
    connected, _ = await socket.connect(timeout=scaled(1))
    assert connected
    assert (await socket.receive_json_from(timeout=scaled(1)))["type"] == "ready"
    return socket


async def talk(socket, text: str) -> list[dict]:
    await socket.send_json_to({"type": "message", "text": text})
    frames = []
    while not frames or frames[-1]["type"] != "run.finished":
        frames.append(await socket.receive_json_from(timeout=scaled(10)))
    return frames


async def until_closed(socket) -> list[dict]:
    """What the socket sent until it closed."""
    outputs = [await socket.receive_output(timeout=scaled(5))]
    while outputs[-1]["type"] != "websocket.close":
        outputs.append(await socket.receive_output(timeout=scaled(5)))
    await socket.disconnect()
    return outputs


@pytest.mark.processes  # langhost.asgi.application starts this process's runtime
@pytest.mark.parametrize("revoked_by", ["deactivation", "sign-out"])
async def test_an_open_conversation_socket_answers_no_more_once_its_user_is_revoked(
        conversation, user, anon_client, revoked_by):
    tokens = await sync_to_async(token_pair)(user)
    socket = await socket_of(conversation, tokens["access_token"])
    assert (await talk(socket, "before"))[-1]["status"] == "completed"

    if revoked_by == "deactivation":
        user.is_active = False
        await user.asave()
    else:
        await sync_to_async(anon_client.post)(
            "/api/v1/auth/logout", {}, format="json",
            HTTP_AUTHORIZATION=f"Bearer {tokens['access_token']}")
    await socket.send_json_to({"type": "message", "text": "after"})

    outputs = await until_closed(socket)

    assert outputs[-1] == {"type": "websocket.close", "code": 4401}
    assert not any("echo: after" in output.get("text", "") for output in outputs)


@pytest.mark.processes  # langhost.asgi.application starts this process's runtime
async def test_a_socket_opened_with_the_admin_session_answers_no_more_once_it_signs_out(
        agent, superuser):
    conversation = await sync_to_async(conversations.create)(
        project_id=str(agent.project_id), agent_id=str(agent.pk), user_id=str(superuser.pk))
    admin = Client()
    await sync_to_async(admin.force_login)(superuser)
    socket = WebsocketCommunicator(
        application, f"/ws/conversations/{conversation.conversation_id}/",
        headers=[(b"cookie", f"sessionid={admin.cookies['sessionid'].value}".encode())])
    assert (await socket.connect(timeout=scaled(1)))[0]
    assert (await socket.receive_json_from(timeout=scaled(1)))["type"] == "ready"
    assert (await talk(socket, "before"))[-1]["status"] == "completed"

    await sync_to_async(admin.logout)()
    await socket.send_json_to({"type": "message", "text": "after"})

    outputs = await until_closed(socket)

    assert outputs[-1] == {"type": "websocket.close", "code": 4401}
