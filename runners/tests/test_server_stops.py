"""A server that stops, cleanly or not, leaves no run `running` and loses nothing its callers
saw: real `manage.py serve` processes, the QA plugin's slow runner, the server's own SQLite
database read directly."""

import json
import random
import signal
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from runners.runtime.process import free_port
from runners.tests.conftest import plugins_dir_with
from runners.tests.langhost_process import (
    descendants,
    fresh_data_dir,
    langhost_env,
    ledger_rows,
    manage,
    start_serve,
    wait_until_serving,
)
from runners.tests.tools.conftest import SERVER as MCP_SERVER
from tests.timing import scaled

pytestmark = pytest.mark.e2e

SLOW = "plugin:e2e/agent-runner-qa/slow"


class Server:
    """One `manage.py serve` on a data dir that outlives it (so it can start again)."""

    def __init__(self, tmp_path):
        self.data_dir = fresh_data_dir(tmp_path / "data")
        self.plugins_dir = plugins_dir_with(tmp_path, "e2e__agent-runner-qa")
        self.process = None

    def start(self) -> str:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = start_serve(self.data_dir, self.plugins_dir, self.port)
        with httpx.Client(base_url=self.url, timeout=scaled(30)) as http:
            self.token = wait_until_serving(http, self.process)
        return self.token

    def stream(self, text: str, received: list, started: threading.Event) -> None:
        """Stream one run of the slow runner, keeping every frame received until the end."""
        try:
            with httpx.Client(base_url=self.url, timeout=scaled(60), headers={
                    "Authorization": f"Bearer {self.token}"}) as http, http.stream(
                    "POST", "/api/v1/runs?stream=1",
                    json={"runner_id": SLOW, "input": {"text": text}}) as response:
                for line in response.iter_lines():
                    received.append(json.loads(line))
                    if received[-1]["type"] == "message.delta":
                        started.set()
        except (httpx.TransportError, json.JSONDecodeError):
            pass  # the server went away mid-stream: what arrived before is what counts
        finally:
            started.set()

    def running(self) -> list[tuple]:
        return ledger_rows(self.data_dir, "SELECT run_id FROM agent_run WHERE status = 'running'")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def server(tmp_path):
    server = Server(tmp_path)
    yield server
    server.stop()


def in_flight(server: Server, pool: ThreadPoolExecutor, texts: list[str]) -> list[list]:
    """Start one streamed run per text; return once each is running (its first delta came)."""
    streams = [([], threading.Event()) for _ in texts]
    for text, (received, started) in zip(texts, streams, strict=True):
        pool.submit(server.stream, text, received, started)
    for _, started in streams:
        assert started.wait(scaled(30)), "a run never started"
    return [received for received, _ in streams]


def test_sigterm_with_runs_in_flight_exits_quickly_and_leaves_none_running(server):
    server.start()
    with ThreadPoolExecutor(5) as pool:
        in_flight(server, pool, ["sleep"] * 5)
        stopped_at = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(timeout=scaled(30))
        seconds = time.monotonic() - stopped_at

    assert seconds < scaled(5)
    runs = ledger_rows(server.data_dir, "SELECT status, status_reason FROM agent_run")
    assert len(runs) == 5
    assert all(status == "cancelled" and "host.shutdown" in reason for status, reason in runs)


def test_sigterm_after_an_mcp_server_was_used_exits_within_3_s_leaving_no_process_of_it(
        server):
    server.start()
    with httpx.Client(base_url=server.url, timeout=scaled(30),
                      headers={"Authorization": f"Bearer {server.token}"}) as http:
        made = http.post("/api/v1/mcp-servers", json={
            "name": "calc", "transport": "stdio", "command": sys.executable,
            "args": [str(MCP_SERVER)], "env": {"SPAWN_CHILD": "1"}}).json()
        refreshed = http.post(f"/api/v1/mcp-servers/{made['id']}/refresh").json()
    assert refreshed["ok"], refreshed  # the server's session is open, its process running
    children = descendants(server.process.pid)
    assert any(str(MCP_SERVER) in _command_line(pid) for pid in children)
    assert any(_command_line(pid).startswith("sleep") for pid in children)  # the server's own

    stopped_at = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    server.process.wait(timeout=scaled(30))

    assert time.monotonic() - stopped_at < scaled(3)
    assert server.process.returncode == 0
    # The kernel tells the server's guard its parent has gone; the guard then ends its group.
    while (left := [pid for pid in children if _alive(pid)]) and \
            time.monotonic() - stopped_at < scaled(3):
        time.sleep(0.05)
    assert left == []


def test_serving_on_a_port_another_process_has_fails_naming_the_setting(tmp_path):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        env = langhost_env(fresh_data_dir(tmp_path / "data"), tmp_path / "plugins")
        finished = manage("serve", "--port", str(port), env=env)
    finally:
        taken.close()

    assert finished.returncode != 0
    assert f"127.0.0.1:{port} cannot be listened on" in finished.stderr
    assert "LANGHOST_PORT" in finished.stderr


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rindex(")") + 2] != "Z"  # a zombie has ended


def test_after_kill_9_a_restarted_server_fails_the_orphaned_runs_at_once(server):
    server.start()
    with ThreadPoolExecutor(15) as pool:
        in_flight(server, pool, ["sleep"] * 15)
        server.process.send_signal(signal.SIGKILL)
        server.process.wait()
        assert len(server.running()) == 15

        restarted_at = time.monotonic()
        server.start()
        while server.running():
            assert time.monotonic() - restarted_at < scaled(5), "runs left running"
            time.sleep(0.05)

    reasons = [reason for (reason,) in ledger_rows(
        server.data_dir, "SELECT status_reason FROM agent_run WHERE status = 'failed'")]
    assert len(reasons) == 15 and all(reason.startswith("host.gone:") for reason in reasons)


@pytest.mark.parametrize("seed", [1, 2])
def test_every_event_a_client_saw_before_a_kill_9_is_in_the_ledger(server, seed):
    server.start()
    kill_after = random.Random(seed).uniform(0.3, 1.2)
    with ThreadPoolExecutor(10) as pool:
        streams = in_flight(server, pool, ["deltas:400:0.005"] * 10)
        time.sleep(scaled(kill_after))
        server.process.send_signal(signal.SIGKILL)
        server.process.wait()

    seen = {(frame["run_id"], frame["sequence"]) for received in streams for frame in received
            if frame["type"] in ("message.delta", "message.completed")}
    stored = set(ledger_rows(server.data_dir, "SELECT run_id, sequence FROM agent_run_event"))
    assert len(seen) > 10, "the clients saw events before the kill"
    assert seen <= stored, f"seen but not stored: {sorted(seen - stored)[:5]}"


def test_every_write_acknowledged_before_a_kill_9_is_kept(server):
    token = server.start()
    http = httpx.Client(base_url=server.url, timeout=scaled(30),
                        headers={"Authorization": f"Bearer {token}"})
    conversation = a_conversation(http)
    acknowledged = {"state": [], "artifacts": [], "messages": []}

    def write_state(i):
        if http.patch(conversation, json={"state": {f"k{i}": i}}).status_code == 200:
            acknowledged["state"].append(f"k{i}")

    def write_artifact(i):
        if http.post(f"{conversation}/artifacts", json={
                "name": f"a{i}", "text": f"v{i}"}).status_code == 201:
            acknowledged["artifacts"].append(f"a{i}")

    def send_message(i):
        answer = http.post(f"{conversation}/messages", json={"text": f"m{i}"})
        if answer.status_code == 201 and answer.json()["status"] == "completed":
            acknowledged["messages"].append(f"m{i}")

    def keep_writing(write):
        for i in range(10_000):
            try:
                write(i)
            except httpx.TransportError:
                return  # the server is gone

    with ThreadPoolExecutor(3) as pool:
        for write in (write_state, write_artifact, send_message):
            pool.submit(keep_writing, write)
        time.sleep(scaled(random.Random(3).uniform(1.0, 2.0)))
        server.process.send_signal(signal.SIGKILL)
        server.process.wait()
    http.close()

    assert all(len(writes) >= 3 for writes in acknowledged.values()), acknowledged
    token = server.start()
    with httpx.Client(base_url=server.url, timeout=scaled(30),
                      headers={"Authorization": f"Bearer {token}"}) as http:
        kept = http.get(conversation).json()
        said = set()
        page = f"{conversation}/messages?page_size=100"
        while page:  # the whole transcript, a page at a time: the detail shows the newest only
            answer = http.get(page).json()
            said |= {entry["content"] for entry in answer["data"] if entry["role"] == "user"}
            page = answer["pagination"]["next"]
        names = {item["name"] for item in http.get(
            f"{conversation}/artifacts", params={"page_size": 100}).json()["data"]}
        last = acknowledged["artifacts"][-1]
        content = http.get(f"{conversation}/artifacts/{last}").content

    assert set(acknowledged["state"]) <= set(kept["state"])
    assert set(acknowledged["artifacts"]) <= names
    assert content == f"v{last[1:]}".encode()
    assert set(acknowledged["messages"]) <= said


def a_conversation(http: httpx.Client) -> str:
    """A conversation with an echo agent of a new project: its URL."""
    project = http.post("/api/v1/projects", json={"name": "Durable", "slug": "durable"}).json()
    agent_type = http.post("/api/v1/agent-types", json={
        "name": "Echo", "slug": "echo", "runner_id": "builtin:echo"}).json()
    agents = f"/api/v1/projects/{project['id']}/agents"
    agent = http.post(agents, json={"agent_type_id": agent_type["id"],
                                    "project_id": project["id"], "name": "Echo"}).json()
    conversations = f"{agents}/{agent['id']}/conversations"
    return f"{conversations}/{http.post(conversations, json={}).json()['id']}"
