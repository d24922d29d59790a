"""A background run over real daphne: `POST /runs?background=1` answers 202 at once, the
client leaves, the run goes on; a socket opened later replays every event from the start and
the final status; `GET /runs/{id}?wait=N` answers once it has ended. A message sent with
`?background=1` goes on the same way."""

import asyncio
import contextlib
import json
import time

import httpx
import pytest
import websockets

from tests.e2e.conftest import daphne_with_plugins
from tests.timing import scaled

pytestmark = pytest.mark.e2e

SLOW = "plugin:e2e/agent-runner-qa/slow"


@pytest.fixture
def server(tmp_path):
    with daphne_with_plugins(tmp_path, "e2e__agent-runner-qa") as (url, _):
        yield url


def signed_in(url, admin_credentials) -> tuple[httpx.Client, str]:
    http = httpx.Client(base_url=url, timeout=scaled(30))
    token = http.post("/api/v1/auth/login", json=admin_credentials).json()["access_token"]
    http.headers["Authorization"] = f"Bearer {token}"
    deadline = time.monotonic() + scaled(60)
    while not any(runner["id"] == SLOW and runner["available"]
                  for runner in http.get("/api/v1/runners").json()["data"]):
        assert time.monotonic() < deadline, "the slow runner did not come up"
        time.sleep(0.1)
    return http, token


def test_a_background_run_goes_on_without_its_client_and_is_joined_later(
        server, admin_credentials):
    http, token = signed_in(server, admin_credentials)
    started = time.monotonic()
    accepted = http.post("/api/v1/runs?background=1",
                         json={"runner_id": SLOW, "input": {"text": "deltas:5:0.4"}})
    answered_in = time.monotonic() - started
    http.close()  # the client leaves

    assert accepted.status_code == 202, accepted.text
    run_id = accepted.json()["run_id"]
    assert accepted.json()["status"] in ("queued", "running")
    assert answered_in < scaled(2.0)  # at once, not after the run's two seconds

    async def replay() -> list[dict]:
        url = f"{server.replace('http', 'ws')}/ws/runs/{run_id}/?after_sequence=0&token={token}"
        frames = []
        async with websockets.connect(url, open_timeout=scaled(10)) as socket:
            async for text in socket:
                frames.append(json.loads(text))
        return frames

    frames = asyncio.run(asyncio.wait_for(replay(), scaled(60)))
    with httpx.Client(base_url=server, timeout=scaled(60),
                      headers={"Authorization": f"Bearer {token}"}) as http:
        ended = http.get(f"/api/v1/runs/{run_id}?wait=30").json()
        refused = http.get(f"/api/v1/runs/{run_id}?wait=600")

    sequences = [frame["sequence"] for frame in frames[:-1]]
    assert sequences == list(range(1, len(sequences) + 1))  # every event, from the start
    assert [f["type"] for f in frames[:-1]].count("message.delta") == 5
    assert frames[-1]["type"] == "run.status" and frames[-1]["status"] == "completed"
    assert ended["status"] == "completed"
    assert refused.status_code == 400 and "wait" in refused.json()["errors"]


def test_a_message_sent_in_the_background_is_answered_without_its_client(
        server, admin_credentials):
    http, _ = signed_in(server, admin_credentials)
    with contextlib.closing(http):
        project = http.post("/api/v1/projects", json={"name": "Bg", "slug": "bg"}).json()
        slow = http.post("/api/v1/agent-types", json={"name": "Slow", "slug": "slow",
                                                      "runner_id": SLOW}).json()
        agents = f"/api/v1/projects/{project['id']}/agents"
        agent = http.post(agents, json={"agent_type_id": slow["id"], "name": "Slow"}).json()
        conversations = f"{agents}/{agent['id']}/conversations"
        conversation = http.post(conversations, json={}).json()
        accepted = http.post(f"{conversations}/{conversation['id']}/messages?background=1",
                             json={"text": "deltas:3:0.2"})
        assert accepted.status_code == 202, accepted.text
        ended = http.get(f"/api/v1/runs/{accepted.json()['run_id']}?wait=30").json()
        entries = http.get(f"{conversations}/{conversation['id']}").json()

    assert ended["status"] == "completed"
    assert accepted.json()["conversation_id"] == conversation["id"]
    assert [entry["role"] for entry in entries["entries"]][-2:] == ["user", "assistant"]
