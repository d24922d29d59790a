"""`ws/runs/<run_id>/`: replay, live events without gaps or duplicates, and who may listen."""

import asyncio
import json
import uuid

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.test import Client

from accounts.tokens import access_token_for
from langhost.asgi import application, router
from ledger.models import AgentRun, AgentRunEvent, RunStatus
from runners.execution.orchestrator import Orchestrator
from runners.protocol import AgentBinding, AgentEventEnvelope, new_run_id
from runners.ws.consumers import RunStreamConsumer
from tests.timing import scaled

pytestmark = [pytest.mark.processes, pytest.mark.asyncio(loop_scope="session"), pytest.mark.django_db(transaction=True)]

SLOW = "plugin:e2e/agent-runner-qa/slow"


def seed_run(project=None, status=RunStatus.COMPLETED, events=3) -> AgentRun:
    run = AgentRun.objects.create(
        run_id=str(uuid.uuid4()), event_id=f"evt-{uuid.uuid4()}", runner_id="builtin:echo",
        project_id=str(project.pk) if project else "", status=status,
        status_reason="stop" if status == RunStatus.COMPLETED else "",
    )
    for sequence in range(1, events + 1):
        add_event(run, sequence)
    return run


def add_event(run: AgentRun, sequence: int, type_="message.delta") -> AgentRunEvent:
    return AgentRunEvent.objects.create(
        run=run, sequence=sequence, type=type_,
        data_json={"chunk": {"role": "assistant", "content": f"part {sequence}"}},
    )


def access_token(user) -> str:
    return access_token_for(user)


def session_cookie(user) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def open_stream(path: str, headers=None) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(application, path, headers=headers or [])
    connected, _ = await communicator.connect(timeout=scaled(5))
    assert connected
    return communicator


async def collect(communicator: WebsocketCommunicator, timeout=10.0) -> tuple[list[dict], int]:
    """Every frame until the server closes the socket, and the close code."""
    frames = []
    while True:
        output = await communicator.receive_output(timeout=scaled(timeout))
        if output["type"] == "websocket.close":
            await communicator.disconnect()  # lets the consumer leave its group and end
            return frames, output.get("code", 1000)
        frames.append(json.loads(output["text"]))


async def close_code(path: str, headers=None) -> int:
    communicator = await open_stream(path, headers)
    frames, code = await collect(communicator)
    assert frames == []
    return code


async def test_a_subscriber_joining_mid_run_gets_every_event_once_in_order_then_the_status(
        qa_gateway, make_user, make_project):
    owner = await sync_to_async(make_user)()
    project = await sync_to_async(make_project)(owner)
    run_id = new_run_id()
    event = AgentEventEnvelope(project_id=str(project.pk), input={"text": "deltas:6:0.2"})
    binding = AgentBinding(binding_id="ws-test", runner_id=SLOW)

    async def drive():
        return [m async for m in Orchestrator(qa_gateway).run(event, binding, run_id=run_id)]

    running = asyncio.ensure_future(drive())
    try:
        for _ in range(round(scaled(200))):  # until the run is under way: two deltas logged
            if await AgentRunEvent.objects.filter(run_id=run_id).acount() >= 2:
                break
            await asyncio.sleep(0.02)
        assert not running.done()
        communicator = await open_stream(f"/ws/runs/{run_id}/?token={access_token(owner)}")
        frames, code = await collect(communicator)
    finally:
        await running

    ledger = [(e.sequence, e.type) async for e in AgentRunEvent.objects.filter(run_id=run_id)
              .order_by("sequence")]
    *events, status = frames
    assert [(f["sequence"], f["type"]) for f in events] == ledger
    assert [f["sequence"] for f in events] == list(range(1, len(ledger) + 1))
    # Deltas that reach the ledger together (a busy machine) are stored as one: the text is whole.
    assert "".join(f["data"]["chunk"]["content"] for f in events
                   if f["type"] == "message.delta") == "".join(f"delta {n}" for n in range(1, 7))
    assert events[-1]["type"] == "run.completed"
    assert status == {"type": "run.status", "run_id": run_id, "status": "completed",
                      "status_reason": "stop", "sequence": len(ledger)}
    assert code == 1000


async def test_live_duplicates_are_dropped_and_a_gap_is_filled_from_the_ledger(superuser):
    run = await sync_to_async(seed_run)(status=RunStatus.RUNNING, events=2)
    communicator = await open_stream(f"/ws/runs/{run.run_id}/",
                                     [(b"cookie", await sync_to_async(session_cookie)(superuser))])
    assert [json.loads(await communicator.receive_from(scaled(5)))["sequence"]
            for _ in range(2)] == [1, 2]

    layer, group = get_channel_layer(), f"run.{run.run_id}"
    live = {"run_id": run.run_id, "type": "message.delta", "data": {}, "usage": None,
            "source": "runner"}
    await layer.group_send(group, {"type": "run.events", "events": [{**live, "sequence": 2}]})
    await sync_to_async(add_event)(run, 3)
    await sync_to_async(add_event)(run, 4)
    # Event 3 never arrives live: event 4 shows the gap, the ledger fills it.
    await layer.group_send(group, {"type": "run.events", "events": [{**live, "sequence": 4}]})
    await layer.group_send(group, {"type": "run.events", "events": [{**live, "sequence": 3}]})
    await sync_to_async(add_event)(run, 5, "run.completed")
    await AgentRun.objects.filter(pk=run.pk).aupdate(status=RunStatus.COMPLETED,
                                                    status_reason="stop")
    await layer.group_send(group, {"type": "run.events", "events": [
        {**live, "sequence": 5, "type": "run.completed"},
        {"type": "run.status", "run_id": run.run_id, "status": "completed",
         "status_reason": "stop", "sequence": 5}]})

    frames, code = await collect(communicator)
    assert [(f.get("sequence"), f["type"]) for f in frames] == [
        (3, "message.delta"), (4, "message.delta"), (5, "run.completed"), (5, "run.status")]
    assert frames[0]["data"] == {"chunk": {"role": "assistant", "content": "part 3"}}
    assert code == 1000


async def test_an_ended_run_is_replayed_from_the_ledger_then_closed(superuser):
    run = await sync_to_async(seed_run)(events=3)
    cookie = [(b"cookie", await sync_to_async(session_cookie)(superuser))]

    frames, code = await collect(await open_stream(f"/ws/runs/{run.run_id}/", cookie))
    assert [f.get("sequence") for f in frames] == [1, 2, 3, 3]
    assert frames[0]["created_at"] and frames[0]["source"] == "runner"
    assert frames[-1] == {"type": "run.status", "run_id": run.run_id, "status": "completed",
                          "status_reason": "stop", "sequence": 3}
    assert code == 1000

    frames, _ = await collect(await open_stream(f"/ws/runs/{run.run_id}/?after_sequence=2",
                                                cookie))
    assert [f.get("sequence") for f in frames] == [3, 3]


async def test_a_jwt_in_the_query_string_or_the_header_is_accepted(user, project):
    run = await sync_to_async(seed_run)(project, events=1)
    token = access_token(user)

    frames, code = await collect(await open_stream(f"/ws/runs/{run.run_id}/?token={token}"))
    assert [f["type"] for f in frames] == ["message.delta", "run.status"] and code == 1000
    frames, code = await collect(await open_stream(
        f"/ws/runs/{run.run_id}/", [(b"authorization", f"Bearer {token}".encode())]))
    assert [f["type"] for f in frames] == ["message.delta", "run.status"] and code == 1000


async def test_a_non_member_is_closed_with_4403(project, outsider, user):
    run = await sync_to_async(seed_run)(project)
    assert await close_code(f"/ws/runs/{run.run_id}/?token={access_token(outsider)}") == 4403
    assert await close_code(f"/ws/runs/{run.run_id}/",
                            [(b"cookie", await sync_to_async(session_cookie)(outsider))]) == 4403
    # A run outside every project (a superuser's runner run) is for superusers only.
    orphan = await sync_to_async(seed_run)()
    assert await close_code(f"/ws/runs/{orphan.run_id}/?token={access_token(user)}") == 4403


@pytest.mark.parametrize("revoked_by", ["deactivation", "sign-out"])
async def test_a_viewer_no_longer_signed_in_is_closed_with_4401(user, project, monkeypatch,
                                                               revoked_by):
    monkeypatch.setattr(RunStreamConsumer, "RECHECK_SECONDS", 0)
    run = await sync_to_async(seed_run)(project, status=RunStatus.RUNNING, events=1)
    token = access_token(user)
    communicator = await open_stream(f"/ws/runs/{run.run_id}/?token={token}")
    assert json.loads(await communicator.receive_from(scaled(5)))["sequence"] == 1

    if revoked_by == "deactivation":
        user.is_active = False
        await user.asave()
    else:
        await sync_to_async(Client().post)("/api/v1/auth/logout", {},
                                           content_type="application/json",
                                           HTTP_AUTHORIZATION=f"Bearer {token}")
    await sync_to_async(add_event)(run, 2)

    frames, code = await collect(communicator)
    assert code == 4401
    assert [frame.get("sequence") for frame in frames] in ([], [2])  # sent before the check


async def test_anonymous_bad_tokens_and_foreign_origins_are_closed_with_4401(project, user):
    run = await sync_to_async(seed_run)(project)
    path = f"/ws/runs/{run.run_id}/"
    assert await close_code(path) == 4401
    assert await close_code(path + "?token=not-a-jwt") == 4401
    cookie = (b"cookie", await sync_to_async(session_cookie)(user))
    host = (b"host", b"localhost:8000")
    assert await close_code(path, [cookie, host, (b"origin", b"https://evil.example")]) == 4401
    frames, _ = await collect(await open_stream(
        path, [cookie, host, (b"origin", b"http://localhost:8000")]))
    assert frames[-1]["type"] == "run.status"


@pytest.mark.parametrize("origin", [
    b"http://localhost:9999",  # another app on another port of the same host
    b"https://localhost:8000",  # another scheme
    b"http://127.0.0.1:8000",  # another host, though it is one of ours too
    b"ftp://localhost:8000",
    b"null",
])
async def test_a_page_of_another_origin_cannot_use_the_operators_cookie(project, user, origin):
    run = await sync_to_async(seed_run)(project)
    cookie = (b"cookie", await sync_to_async(session_cookie)(user))

    code = await close_code(f"/ws/runs/{run.run_id}/",
                            [cookie, (b"host", b"localhost:8000"), (b"origin", origin)])

    assert code == 4401


async def test_a_trusted_origin_and_the_default_port_are_the_same_origin(project, user,
                                                                         settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://console.example"]
    run = await sync_to_async(seed_run)(project)
    cookie = (b"cookie", await sync_to_async(session_cookie)(user))
    path = f"/ws/runs/{run.run_id}/"

    for host, origin in [(b"localhost", b"http://localhost:80"),
                         (b"localhost:8000", b"https://console.example")]:
        frames, _ = await collect(await open_stream(
            path, [cookie, (b"host", host), (b"origin", origin)]))
        assert frames[-1]["type"] == "run.status"


async def test_an_unknown_run_or_a_bad_after_sequence_is_refused(superuser, monkeypatch):
    from runners.ws.consumers import RunStreamConsumer

    monkeypatch.setattr(RunStreamConsumer, "APPEAR_TIMEOUT", 0.2)
    token = access_token(superuser)
    assert await close_code(f"/ws/runs/{uuid.uuid4()}/?token={token}") == 4404
    run = await sync_to_async(seed_run)()
    assert await close_code(f"/ws/runs/{run.run_id}/?token={token}&after_sequence=x") == 4400


def flaky_run_outcome(monkeypatch, fail_polls):
    """The consumer's ledger reads: the first (at connect) works; polls numbered in
    `fail_polls` (1 = the first poll) raise as if the database were away."""
    from django.db import OperationalError

    from ledger.selectors import runs as readers
    from runners.ws.consumers import RunStreamConsumer

    monkeypatch.setattr(RunStreamConsumer, "POLL_SECONDS", 0.01)
    real = readers.run_outcome
    calls = []

    async def run_outcome(run_id):
        calls.append(run_id)
        if len(calls) - 1 in fail_polls:
            raise OperationalError("database is locked")
        return await real(run_id)

    monkeypatch.setattr(readers, "run_outcome", run_outcome)
    return calls


async def test_a_failed_ledger_poll_is_retried_at_the_next_one(superuser, monkeypatch):
    run = await sync_to_async(seed_run)(status=RunStatus.RUNNING, events=1)
    calls = flaky_run_outcome(monkeypatch, fail_polls={1, 2})
    communicator = await open_stream(f"/ws/runs/{run.run_id}/?token={access_token(superuser)}")
    assert json.loads(await communicator.receive_from(scaled(5)))["sequence"] == 1
    await sync_to_async(add_event)(run, 2, "run.completed")
    await AgentRun.objects.filter(pk=run.pk).aupdate(status=RunStatus.COMPLETED,
                                                    status_reason="stop")

    frames, code = await collect(communicator)

    assert [(f.get("sequence"), f["type"]) for f in frames] == [(2, "run.completed"),
                                                               (2, "run.status")]
    assert code == 1000 and len(calls) >= 4


async def test_a_ledger_that_keeps_failing_closes_the_stream_with_1011(superuser, monkeypatch):
    run = await sync_to_async(seed_run)(status=RunStatus.RUNNING, events=1)
    flaky_run_outcome(monkeypatch, fail_polls=range(1, 100))
    communicator = await open_stream(f"/ws/runs/{run.run_id}/?token={access_token(superuser)}")
    assert json.loads(await communicator.receive_from(scaled(5)))["sequence"] == 1

    frames, code = await collect(communicator)

    assert (frames, code) == ([], 1011)


async def test_a_websocket_to_a_path_no_route_matches_closes_with_4404():
    # The router itself: `application` would start this process's runtime on first use.
    communicator = WebsocketCommunicator(router, "/ws/nothing-here/")
    connected, _ = await communicator.connect(timeout=scaled(5))

    assert connected
    assert (await communicator.receive_output(timeout=scaled(5)))["code"] == 4404
    await communicator.disconnect()
