"""Two web processes and two runtime workers on PostgreSQL and Redis, as `deploy/` lays them out.

The tests run in file order on one cluster: the killing ones restart what they killed, and the
last one stops everything and checks that nothing is left running.
"""

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
import websockets
from channels_redis.core import RedisChannelLayer

from runners.runtime.process import free_port
from runners.runtime.worker import ChannelGateway
from runners.schedules.api.serializers import LAST_RUNS
from runners.tests.conftest import plugins_dir_with
from runners.webhooks.tests.test_webhooks import Receiver
from tests.cluster.conftest import ADMIN, DEPLOY, alive, command_line
from tests.fake_providers import FakeProvider, Reply
from tests.timing import scaled

pytestmark = pytest.mark.cluster

ECHO = "plugin:e2e/agent-runner-qa/default"
SLOW = "plugin:e2e/agent-runner-qa/slow"
MODEL_CALLER = "plugin:e2e/agent-runner-llm/model-caller"
HOST_ACTIONS = "plugin:e2e/agent-runner-qa/host-actions"
STEERABLE = "plugin:e2e/agent-runner-qa/steerable"
CONFIRM = "plugin:e2e/agent-runner-qa/confirm"
MCP_SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "mcp" / "server.py"


async def run_many(cluster, count: int, in_flight: int) -> list[httpx.Response]:
    """`count` echo runs, `in_flight` at a time, alternating between the web processes."""
    gate = asyncio.Semaphore(in_flight)
    limits = httpx.Limits(max_connections=in_flight)
    clients = [httpx.AsyncClient(base_url=web.url, headers=cluster.headers, limits=limits,
                                 timeout=scaled(60)) for web in cluster.web]

    async def one(number: int) -> httpx.Response:
        async with gate:
            return await clients[number % 2].post(
                "/api/v1/runs", json={"runner_id": ECHO, "input": {"text": f"run {number}"}})

    try:
        return await asyncio.gather(*(one(number) for number in range(count)))
    finally:
        for client in clients:
            await client.aclose()


def not_completed(answers: list[httpx.Response]) -> list[str]:
    """Why the runs that did not complete did not (empty when all did)."""
    return [answer.text for answer in answers
            if answer.status_code != 201 or answer.json()["status"] != "completed"]


def start_streaming(cluster, web, text: str) -> tuple[str, threading.Thread]:
    """Start a slow run on `web`, streamed by a thread that reads it to its end (or until the
    process dies); the run's id once it is running."""
    started = threading.Event()
    run_id = []

    def read() -> None:
        try:
            with cluster.client(web) as client, client.stream(
                    "POST", "/api/v1/runs?stream=1",
                    json={"runner_id": SLOW, "input": {"text": text}}) as stream:
                for line in stream.iter_lines():
                    frame = json.loads(line)
                    if not run_id:
                        run_id.append(frame["run_id"])
                    elif frame.get("type") == "message.delta":
                        started.set()
        except httpx.TransportError:
            pass  # the web process was killed
        finally:
            started.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert started.wait(scaled(30)) and run_id, "the run did not start"
    return run_id[0], reader


def status_of(cluster, run_id: str) -> tuple[str, str]:
    return cluster.rows("SELECT status, status_reason FROM agent_run WHERE run_id = %s",
                        run_id)[0]


def wait_for_end(cluster, run_id: str, within: float) -> tuple[str, str, float]:
    started = time.monotonic()
    while (row := status_of(cluster, run_id))[0] == "running":
        assert time.monotonic() - started < within, f"run {run_id} still running"
        time.sleep(0.1)
    return row[0], row[1], time.monotonic() - started


# Eight waves of fifty at once: enough to load both web processes and both workers, each a
# share; a thousand proved nothing more and took a minute of the suite.
RUNS_AT_LOAD = 400


@pytest.mark.slow("hundreds of runs through two web processes and two workers", seconds=30)
def test_hundreds_of_runs_through_both_web_processes_all_complete(cluster):
    served_before = [worker.runs_served() for worker in cluster.workers]

    answers = asyncio.run(run_many(cluster, RUNS_AT_LOAD, in_flight=50))

    assert not_completed(answers) == []
    run_ids = [answer.json()["run_id"] for answer in answers]
    # Every event once, numbered 1..n without a gap, for every run.
    events = cluster.rows(
        "SELECT r.run_id, count(e.id), count(DISTINCT e.sequence), min(e.sequence), "
        "max(e.sequence) FROM agent_run r JOIN agent_run_event e ON e.run_id = r.run_id "
        "WHERE r.run_id = ANY(%s) GROUP BY r.run_id", run_ids)
    assert len(events) == RUNS_AT_LOAD
    assert all(count == distinct == last and first == 1
               for _, count, distinct, first, last in events), events[:3]
    assert cluster.rows("SELECT count(*) FROM agent_run WHERE status = 'running'") == [(0,)]
    # Both web processes executed runs, and both workers served some.
    owners = cluster.rows("SELECT count(DISTINCT execution_owner_id) FROM agent_run "
                          "WHERE run_id = ANY(%s)", run_ids)
    assert owners == [(2,)]
    served = [worker.runs_served() - before
              for worker, before in zip(cluster.workers, served_before, strict=True)]
    assert all(count > 0 for count in served), served
    assert sum(served) == RUNS_AT_LOAD


def test_a_run_started_on_one_web_process_streams_through_the_other(cluster):
    run_id, reader = start_streaming(cluster, cluster.web[0], "deltas:6:0.3")

    async def watch() -> list[dict]:
        url = (f"ws://127.0.0.1:{cluster.web[1].port}/ws/runs/{run_id}/"
               f"?token={cluster.token}")
        frames = []
        async with websockets.connect(url, open_timeout=scaled(10)) as socket:
            async for text in socket:
                frames.append(json.loads(text))
        return frames

    frames = asyncio.run(asyncio.wait_for(watch(), scaled(60)))
    reader.join(scaled(30))

    stored = cluster.rows(
        "SELECT e.sequence, e.type FROM agent_run_event e JOIN agent_run r ON e.run_id = r.run_id "
        "WHERE r.run_id = %s ORDER BY e.sequence", run_id)
    events, final = frames[:-1], frames[-1]
    assert [(frame["sequence"], frame["type"]) for frame in events] == stored
    assert [type_ for _, type_ in stored].count("message.delta") >= 1
    assert final["type"] == "run.status" and final["status"] == "completed", final


@pytest.mark.slow("waits out a killed worker's leases")
def test_killing_a_runtime_worker_fails_its_runs_and_the_other_takes_new_ones(cluster):
    streams = [start_streaming(cluster, cluster.web[number % 2], "deltas:60:0.5")
               for number in range(4)]
    streaming = [worker.health().json()["runs"]["streaming"] for worker in cluster.workers]
    victim = 0 if streaming[0] else 1
    assert streaming[victim] > 0, streaming
    survivor = cluster.workers[1 - victim]

    cluster.workers[victim].kill()
    killed = time.monotonic()
    while len(failed := [row for row in map(lambda run: status_of(cluster, run[0]), streams)
                         if row[0] == "failed"]) < streaming[victim]:
        assert time.monotonic() - killed < cluster.lease, "the killed worker's runs not failed"
        time.sleep(0.1)

    assert all("runtime worker" in reason and "went silent" in reason for _, reason in failed)
    # The survivor's runs go on; new runs are served at once, by the survivor alone.
    assert [status_of(cluster, run_id)[0] for run_id, _ in streams].count("running") == \
        len(streams) - streaming[victim]
    before = survivor.runs_served()
    answers = asyncio.run(run_many(cluster, 20, in_flight=4))
    assert not_completed(answers) == []
    assert survivor.runs_served() - before == 20
    with cluster.client(cluster.web[0]) as client:
        for run_id, reader in streams:
            client.post(f"/api/v1/runs/{run_id}/cancel")
            reader.join(scaled(30))

    cluster.workers[victim] = restarted = cluster.restart(cluster.workers[victim])
    answers = asyncio.run(run_many(cluster, 40, in_flight=8))
    assert not_completed(answers) == []
    assert restarted.runs_served() > 0


def test_killing_a_web_process_fails_its_runs_and_the_other_keeps_serving(cluster):
    run_id, _ = start_streaming(cluster, cluster.web[1], "deltas:60:0.5")

    cluster.web[1].kill()
    status, reason, elapsed = wait_for_end(cluster, run_id, cluster.lease + scaled(5))

    assert status == "failed" and reason.startswith("host.gone:"), reason
    assert elapsed < cluster.lease
    with cluster.client(cluster.web[0]) as client:
        answer = client.post("/api/v1/runs", json={"runner_id": ECHO, "input": {"text": "on"}})
    assert answer.json()["status"] == "completed"
    cluster.web[1] = cluster.restart(cluster.web[1])


def test_after_a_postgres_restart_mid_load_every_process_serves_again(cluster):
    load = threading.Thread(target=lambda: answers.extend(
        asyncio.run(run_many(cluster, 300, in_flight=20))))
    answers: list[httpx.Response] = []
    load.start()
    time.sleep(scaled(1))
    cluster.servers.postgres.stop()
    time.sleep(1)
    cluster.servers.postgres.start()
    load.join(scaled(120))

    # What failed says why: a run failed with its reason, or a request answered 503.
    for answer in answers:
        assert answer.status_code in (201, 503), answer.text
        body = answer.json()
        if answer.status_code == 503 or body["status"] != "completed":
            assert body.get("status_reason") or body.get("detail"), body
    # Every process serves again, without a restart: each web process completes runs, and so
    # does each worker.
    for process in cluster.web + cluster.workers:
        process.wait_healthy()
    served_before = [worker.runs_served() for worker in cluster.workers]
    answers = asyncio.run(run_many(cluster, 60, in_flight=10))
    assert not_completed(answers) == []
    assert all(worker.runs_served() > before
               for worker, before in zip(cluster.workers, served_before, strict=True))
    # Nothing stays `running`: what the outage interrupted was ended.
    give_up = time.monotonic() + cluster.lease + scaled(5)
    while cluster.rows("SELECT count(*) FROM agent_run WHERE status = 'running'") != [(0,)]:
        assert time.monotonic() < give_up, "runs left running after the restart"
        time.sleep(0.2)


@contextlib.contextmanager
def deploys_nginx(cluster, tmp_path):
    """deploy/nginx.conf in front of this cluster's web processes: its address."""
    nginx, port = shutil.which("nginx") or "/usr/sbin/nginx", free_port()
    snippet = (DEPLOY / "nginx.conf").read_text()
    for default, web in zip(("127.0.0.1:8000", "127.0.0.1:8001"), cluster.web, strict=True):
        snippet = snippet.replace(default, f"127.0.0.1:{web.port}")
    (tmp_path / "langhost.conf").write_text(snippet.replace("listen 8080;", f"listen 127.0.0.1:{port};"))
    user = "user root;" if os.geteuid() == 0 else ""
    (tmp_path / "nginx.conf").write_text(
        f"{user} daemon off; pid {tmp_path}/nginx.pid; error_log {tmp_path}/error.log;\n"
        f"events {{}}\nhttp {{ access_log off; client_body_temp_path {tmp_path}/body;\n"
        f"proxy_temp_path {tmp_path}/proxy; include {tmp_path}/langhost.conf; }}\n")
    server = subprocess.Popen([nginx, "-c", str(tmp_path / "nginx.conf"), "-p", str(tmp_path)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    front = f"http://127.0.0.1:{port}"
    try:
        give_up = time.monotonic() + scaled(10)
        while True:
            try:
                if httpx.get(f"{front}/healthz", timeout=scaled(5)).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None and time.monotonic() < give_up, "nginx did not start"
            time.sleep(0.1)
        yield front, port
    finally:
        server.terminate()
        server.wait()


def test_one_address_in_front_through_deploys_nginx_snippet(cluster, tmp_path):
    """deploy/nginx.conf, with this cluster's ports: runs over HTTP and a live WebSocket."""
    with deploys_nginx(cluster, tmp_path) as (front, port):
        with httpx.Client(base_url=front, headers=cluster.headers, timeout=scaled(30)) as client:
            answers = [client.post("/api/v1/runs", json={"runner_id": SLOW,
                                                         "input": {"text": "deltas:3:0.2"}})
                       for _ in range(4)]
        assert not_completed(answers) == []

        async def watch(run_id: str) -> list[dict]:
            url = f"ws://127.0.0.1:{port}/ws/runs/{run_id}/?token={cluster.token}"
            async with websockets.connect(url, open_timeout=scaled(10)) as socket:
                return [json.loads(text) async for text in socket]

        frames = asyncio.run(asyncio.wait_for(watch(answers[0].json()["run_id"]), scaled(30)))
        assert frames[-1]["type"] == "run.status" and frames[-1]["status"] == "completed"
        assert [frame["sequence"] for frame in frames[:-1]] == list(range(1, len(frames)))


def test_through_deploys_nginx_an_attacking_address_locks_out_itself_only(cluster, tmp_path):
    def client_from(address: str, front: str) -> httpx.Client:
        return httpx.Client(base_url=front, timeout=scaled(30),
                            transport=httpx.HTTPTransport(local_address=address))

    with deploys_nginx(cluster, tmp_path) as (front, _), \
            client_from("127.0.0.2", front) as attacker, \
            client_from("127.0.0.3", front) as owner, \
            client_from("127.0.0.4", front) as newcomer:
        login = "/api/v1/auth/login"
        assert owner.post(login, json=ADMIN).status_code == 200  # signed in here before
        wrong = {**ADMIN, "password": "not-the-password"}
        answers = [attacker.post(login, json=wrong).status_code for _ in range(100)]
        assert set(answers) == {401, 429} and answers[-1] == 429
        assert attacker.post(login, json=ADMIN).status_code == 429

        assert owner.post(login, json=ADMIN).status_code == 200
        account = {"email": "newcomer@example.com", "password": "Newcomer-Passw0rd-42"}
        assert newcomer.post("/api/v1/auth/register", json=account).status_code == 202
        assert newcomer.post(login, json=account).status_code == 200


def test_workers_with_different_plugins_each_serve_what_they_have(cluster, tmp_path):
    """A third worker whose runtime has only other plugins: what the others list stays
    available, its own runners and tools become available, and runs and tool calls reach a
    worker that has them; once it stops, what only it had is no longer offered."""
    other_plugins = plugins_dir_with(tmp_path, "e2e__agent-runner-llm", "e2e__tools-demo")
    third = cluster.start("runtime", env={"LANGHOST_PLUGINS_DIR": str(other_plugins)})
    try:
        third.wait_healthy()
        # Healthy says its runtime is up; what it lists reaches the others' view within a
        # discovery (another worker's refresh may pass over it until its listing is recorded).
        until_available = time.monotonic() + scaled(30)
        while (available := runner_available(cluster)) != {ECHO: True, SLOW: True,
                                                            MODEL_CALLER: True}:
            assert time.monotonic() < until_available, available
            time.sleep(0.2)
        statuses = dict(cluster.rows("SELECT author || '/' || name, status "
                                     "FROM runners_plugininstallation"))
        assert statuses["e2e/agent-runner-qa"] == "initialized", statuses
        assert cluster.rows("SELECT DISTINCT available FROM runners_tooldescriptor "
                            "WHERE plugin_name = 'tools-demo'") == [(True,)]

        answers = asyncio.run(run_many(cluster, 60, in_flight=6))
        assert not_completed(answers) == []
        assert third.runs_served() == 0  # it handed every echo run to a worker that has it

        async def reverse_ten_times() -> list[dict]:
            gateway = ChannelGateway(RedisChannelLayer(hosts=[cluster.servers.redis.url]))
            return [await gateway.call_tool("e2e", "tools-demo", "reverse", {"text": "stressed"},
                                            scaled(10)) for _ in range(10)]

        assert asyncio.run(reverse_ten_times()) == [{"text": "desserts"}] * 10
    finally:
        third.stop()
    assert runner_available(cluster) == {ECHO: True, SLOW: True, MODEL_CALLER: False}


def runner_available(cluster) -> dict[str, bool]:
    return dict(cluster.rows("SELECT id, available FROM runners_runnerdescriptor "
                             "WHERE id = ANY(%s)", [ECHO, SLOW, MODEL_CALLER]))


def created(response: httpx.Response) -> dict:
    assert response.status_code == 201, response.text
    return response.json()


def conversation_with(cluster, runner_id: str, slug: str, **agent_type) -> dict:
    """A new conversation with an agent of a new type running `runner_id`: its REST path, its
    id and its agent's."""
    with cluster.client(cluster.web[0]) as http:
        kind = created(http.post("/api/v1/agent-types", json={
            "name": slug, "slug": slug, "runner_id": runner_id, **agent_type}))
        project = created(http.post("/api/v1/projects", json={"name": slug, "slug": slug}))
        agents = f"/api/v1/projects/{project['id']}/agents"
        agent = created(http.post(agents, json={"agent_type_id": kind["id"],
                                                "project_id": project["id"], "name": slug}))
        path = f"{agents}/{agent['id']}/conversations"
        conversation = created(http.post(path, json={}))
    return {"path": f"{path}/{conversation['id']}", "id": conversation["id"],
            "agent_id": agent["id"]}


def talk_over_socket(cluster, web, conversation: dict, text: str) -> list[dict]:
    """Send one message on `web`'s conversation socket; every frame until the run's end and
    its last live event."""
    url = (f"ws://127.0.0.1:{web.port}/ws/conversations/{conversation['id']}/"
           f"?agent_id={conversation['agent_id']}&token={cluster.token}")

    async def talk() -> list[dict]:
        frames = []
        async with websockets.connect(url, open_timeout=scaled(10)) as socket:
            await socket.send(json.dumps({"type": "message", "text": text}))
            async for raw in socket:
                frames.append(json.loads(raw))
                live_end = any(frame.get("type") == "run.event"
                               and frame["event"]["type"] in ("run.completed", "run.failed")
                               for frame in frames)
                if live_end and any(frame["type"] == "run.finished" for frame in frames):
                    return frames
        return frames

    return asyncio.run(asyncio.wait_for(talk(), scaled(60)))


def test_what_a_plugin_asks_of_the_host_reaches_its_run_on_the_web_process_that_runs_it(
        cluster):
    provider = FakeProvider("openai").start()
    try:
        with cluster.client(cluster.web[0]) as http:
            created(http.post("/api/v1/mcp-servers", json={
                "name": "fixture-tools", "transport": "stdio", "command": sys.executable,
                "args": [str(MCP_SERVER)]}))
            upstream = created(http.post("/api/v1/model-providers", json={
                "name": "scripted", "kind": "openai", "base_url": provider.base_url,
                "api_key": "sk-cluster-scripted"}))
            created(http.post("/api/v1/models", json={
                "name": "scripted-chat", "provider_id": upstream["id"],
                "upstream_model": "scripted-upstream", "model_type": "chat",
                "context_window": 8192}))
        conversation = conversation_with(cluster, HOST_ACTIONS, "host-actions",
                                         primary_model="scripted-chat",
                                         mcp_servers=["fixture-tools"])
        provider.script(Reply(text="the model answers", input_tokens=30, output_tokens=7))

        frames = talk_over_socket(cluster, cluster.web[0], conversation, "ping")
    finally:
        provider.stop()

    finished = next(frame for frame in frames if frame["type"] == "run.finished")
    assert finished["status"] == "completed", finished["status_reason"]
    run_id = finished["run_id"]
    stored = cluster.rows("SELECT sequence, type, source, data_json FROM agent_run_event "
                          "WHERE run_id = %s ORDER BY sequence", run_id)
    host = [(type_, data) for _, type_, source, data in stored if source == "host"]
    assert [type_ for type_, _ in host] == ["tool.call.started", "tool.call.completed",
                                           "message.completed", "state.updated"], stored
    assert host[1][1]["tool_name"] == "echo" and host[1][1]["result"]["text"] == "ping"
    assert host[2][1]["message"]["content"] == "tool said: ping"
    assert host[3][1] == {"scope": "conversation", "key": "e2e.host",
                          "value": {"model": "the model answers"}}
    # The live stream on the web process that started the run: the same events, in order.
    live = [(frame["event"]["sequence"], frame["event"]["type"]) for frame in frames
            if frame["type"] == "run.event"]
    assert live == [(sequence, type_) for sequence, type_, _, _ in stored]
    # Its caller got the reply sent through the host, before the runner's own answer.
    replies = [frame["data"]["message"]["content"] for frame in frames
               if frame["type"] == "message.completed"]
    assert replies == ["tool said: ping", "the model answers"]
    # Both are lines of the conversation: the next turn's history holds them.
    lines = cluster.rows("SELECT content FROM transcript WHERE run_id = %s AND role = 'assistant' "
                         "ORDER BY id", run_id)
    assert lines == [("tool said: ping",), ("the model answers",)]
    # The model call, answered in a runtime worker, is the run's and its agent's.
    calls = cluster.rows("SELECT agent_id, status, input_tokens, output_tokens FROM model_call "
                         "WHERE run_id = %s", run_id)
    assert calls == [(conversation["agent_id"], "ok", 30, 7)]
    with cluster.client(cluster.web[1]) as http:
        project_agent = conversation["path"].split("/conversations/")[0]
        metrics = http.get(f"{project_agent}/metrics").json()
    assert metrics["total_tokens_used"] == 37


def test_a_message_sent_through_one_web_process_joins_the_steering_run_on_the_other(cluster):
    conversation = conversation_with(cluster, STEERABLE, "steerable")
    answers: list[dict] = []

    def first_message() -> None:
        with cluster.client(cluster.web[0]) as http, http.stream(
                "POST", f"{conversation['path']}/messages?stream=1",
                json={"text": "first"}) as stream:
            answers.extend(json.loads(line) for line in stream.iter_lines())

    reader = threading.Thread(target=first_message, daemon=True)
    reader.start()
    give_up = time.monotonic() + scaled(30)
    while not (running := cluster.rows(
            "SELECT run_id FROM agent_run WHERE agent_id = %s AND status = 'running'",
            conversation["agent_id"])):
        assert time.monotonic() < give_up, "the first message's run did not start"
        time.sleep(0.05)

    with cluster.client(cluster.web[1]) as http:
        joined = http.post(f"{conversation['path']}/messages", json={"text": "second"})
    reader.join(scaled(30))

    assert joined.status_code == 201, joined.text
    assert (joined.json()["status"], joined.json()["run_id"]) == ("steered", running[0][0])
    finished = answers[-1]
    assert (finished["type"], finished["status"]) == ("run.finished", "completed"), answers
    assert finished["reply"]["content"] == "steered: second"


def test_messages_to_one_conversation_through_both_web_processes_run_one_after_the_other(
        cluster):
    conversation = conversation_with(cluster, SLOW, "queued")
    with cluster.client(cluster.web[0]) as first, cluster.client(cluster.web[1]) as second:
        one = first.post(f"{conversation['path']}/messages?background=1",
                         json={"text": "deltas:3:0.3"})
        time.sleep(0.05)
        two = second.post(f"{conversation['path']}/messages?background=1",
                          json={"text": "deltas:1:0"})
        assert (one.status_code, two.status_code) == (202, 202), (one.text, two.text)
        assert two.json()["status"] == "queued"
        ended = [http.get(f"/api/v1/runs/{answer.json()['run_id']}?wait=30").json()
                 for http, answer in ((first, one), (second, two))]

    assert [run["status"] for run in ended] == ["completed", "completed"], ended
    assert ended[1]["started_at"] >= ended[0]["finished_at"]
    owners = cluster.rows("SELECT execution_owner_id FROM agent_run WHERE run_id = ANY(%s)",
                          [run["run_id"] for run in ended])
    assert len({owner for (owner,) in owners}) == 2  # each web process ran its own


@pytest.mark.slow("lets a schedule tick for seconds, then waits for its last runs")
def test_a_schedule_starts_one_run_per_tick_with_two_workers_looking(cluster):
    conversation = conversation_with(cluster, ECHO, "scheduled")
    project_id = conversation["path"].split("/")[4]
    with cluster.client(cluster.web[0]) as http:
        schedule = created(http.post(f"/api/v1/projects/{project_id}/schedules", json={
            "name": "every 2 s", "cron": "* * * * * */2", "agent_id": conversation["agent_id"],
            "input": {"text": "tick"}}))
        time.sleep(scaled(7))
        http.patch(f"/api/v1/projects/{project_id}/schedules/{schedule['id']}",
                   json={"enabled": False})
        # A tick that fired just before the schedule was disabled may still be running: the
        # schedule lists its runs once they have ended.
        give_up = time.monotonic() + scaled(15)
        while True:
            listed = http.get(f"/api/v1/projects/{project_id}/schedules/{schedule['id']}").json()
            runs = cluster.rows(
                "SELECT event_id, status, run_id FROM agent_run WHERE event_id LIKE %s "
                "ORDER BY id DESC", f"schedule:{schedule['id']}:%")
            # The schedule lists its newest runs only (more tick on a slow machine's longer wait).
            if ({status for _, status, _ in runs} == {"completed"} and [
                    run["run_id"] for run in listed["last_runs"]] == [
                    run_id for _, _, run_id in runs[:LAST_RUNS]]):
                break
            assert time.monotonic() < give_up, (runs, listed["last_runs"])
            time.sleep(0.2)

    ticks = [event_id for event_id, _, _ in runs]
    assert len(ticks) >= 2, runs
    assert len(set(ticks)) == len(ticks)  # no tick ran twice
    seconds = sorted(int(tick.rsplit(":", 1)[1]) for tick in ticks)
    assert all(later - earlier >= 2 for earlier, later in zip(seconds, seconds[1:], strict=False))


def test_a_question_asked_on_one_web_process_is_answered_through_the_other(cluster):
    conversation = conversation_with(cluster, CONFIRM, "confirm")
    frames = talk_over_socket(cluster, cluster.web[0], conversation, "deploy")
    (question,) = [frame for frame in frames if frame["type"] == "interaction.requested"]

    with cluster.client(cluster.web[1]) as http:
        answered = http.post(
            f"{conversation['path']}/interactions/{question['data']['interaction_id']}",
            json={"token": question["data"]["token"], "action_id": "yes"})
        replayed = http.post(
            f"{conversation['path']}/interactions/{question['data']['interaction_id']}",
            json={"token": question["data"]["token"], "action_id": "no"})

    assert answered.status_code == 201, answered.text
    assert answered.json()["reply"]["content"] == "you chose yes"
    assert replayed.status_code == 409


def test_a_runs_outcome_is_posted_once_by_the_workers(cluster):
    hook = Receiver(500)
    try:
        with cluster.client(cluster.web[0]) as http:
            run = created(http.post("/api/v1/runs", json={
                "runner_id": ECHO, "input": {"text": "hi"}, "webhook": hook.url}))
            hook.wait_for(2, scaled(30))
    finally:
        hook.server.shutdown()

    assert len(hook.received) == 2  # the 500, then the one acknowledged
    assert json.loads(hook.received[1][1])["run_id"] == run["run_id"]


def test_stopping_the_cluster_leaves_nothing_running(cluster):
    started = cluster.pids()
    assert len(started) > 4  # the web processes, the workers, their runtimes and plugins
    postgres_pid = int((cluster.servers.postgres.data / "postmaster.pid").read_text().split()[0])

    cluster.stop()
    # SIGTERM, as a process manager stops them: each ends cleanly, the workers unregistered.
    assert [process.popen.returncode for process in cluster.web + cluster.workers] == [0] * 4
    assert cluster.rows("SELECT count(*) FROM runners_runtimeworker") == [(0,)]
    cluster.servers.__exit__()

    left = [command_line(pid) for pid in [*started, postgres_pid,
                                          cluster.servers.redis.process.pid] if alive(pid)]
    assert left == []
