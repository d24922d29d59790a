"""Seed 000, as LangBot's E2E suite drives a host: a fresh `manage.py serve` with no admin,
`user/init` with a plain user name, `user/auth`, the echo runner through the debug action,
and the ledger read with SQL by the event's own id."""

import json
import shutil
import sqlite3
import time
from contextlib import closing

import httpx
import pytest

from runners.runtime.process import free_port
from runners.tests.langhost_process import fresh_data_dir, langhost_env, popen_manage
from tests.timing import scaled

pytestmark = pytest.mark.e2e

QA_PLUGIN = "tests/fixtures/plugins/e2e__agent-runner-qa"
ADMIN = {"user": "admin", "password": "admin"}
EVENT_ID = "e2e-orchestrator-event-001"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("seed-000")
    shutil.copytree(QA_PLUGIN, tmp / "plugins" / "e2e__agent-runner-qa")
    data_dir = fresh_data_dir(tmp / "data")
    port = free_port()
    env = {key: value for key, value in langhost_env(data_dir, tmp / "plugins").items()
           if not key.startswith("LANGHOST_ADMIN_")}
    process = popen_manage("serve", "--port", str(port), env=env)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=scaled(60)) as http:
            give_up = time.monotonic() + scaled(60)
            while True:
                assert process.poll() is None, "manage.py serve exited"
                try:
                    http.get("/healthz")
                    break
                except httpx.TransportError:
                    assert time.monotonic() < give_up, "manage.py serve never answered"
                    time.sleep(0.1)
            yield http, data_dir
    finally:
        process.terminate()
        process.wait(timeout=scaled(30))


def ledger(data_dir, query: str) -> list[tuple]:
    with closing(sqlite3.connect(data_dir / "langhost.sqlite3", timeout=30)) as db:
        return db.execute(query).fetchall()


def test_seed_000_as_written(served):
    http, data_dir = served

    assert http.post("/api/v1/user/init", json=ADMIN).json()["code"] == 0
    signed_in = http.post("/api/v1/user/auth", json=ADMIN).json()
    assert signed_in["code"] == 0
    answer = http.post(
        "/api/v1/system/debug/plugin/action",
        headers={"Authorization": f"Bearer {signed_in['data']['token']}"},
        json={"action": "run_agent", "timeout": 60, "data": {
            "plugin_author": "e2e", "plugin_name": "agent-runner-qa", "runner_name": "default",
            "context": {"event": {"event_id": EVENT_ID, "event_type": "message.received"},
                        "conversation": {"conversation_id": "e2e-conversation"},
                        "input": {"text": "hello from orchestrator e2e"}}}}).json()

    assert answer["code"] == 0, answer
    assert answer["data"]["type"] == "message.completed"
    assert answer["data"]["data"]["message"]["content"] == "e2e echo: hello from orchestrator e2e"
    assert ledger(data_dir, "SELECT status, runner_id FROM agent_run WHERE event_id = "
                            f"'{EVENT_ID}'") == [("completed", "plugin:e2e/agent-runner-qa/default")]
    types = {type_ for (type_,) in ledger(data_dir, "SELECT type FROM agent_run_event")}
    assert {"state.updated", "message.completed", "run.completed"} <= types
    (value,), = ledger(data_dir, "SELECT value_json FROM agent_runner_state "
                                 "WHERE state_key = 'e2e.echo_count'")
    assert json.loads(value)["count"] == 1
