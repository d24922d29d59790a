"""Issue 5's acceptance over real HTTP: daphne, the real plugin runtime, the echo fixture.

Spawn an agent whose type runs `plugin:e2e/agent-runner-qa/default`, open a conversation, send
two messages, get two replies; the run ledger shows two completed runs attributed to the agent,
and its metrics count them.
"""

import httpx
import pytest

from runners.tests.conftest import plugins_dir_with
from tests.browser.conftest import wait_until
from tests.e2e.conftest import ADMIN_EMAIL, ADMIN_PASSWORD, start_daphne, stop_daphne
from tests.timing import scaled

pytestmark = pytest.mark.e2e

ECHO = "plugin:e2e/agent-runner-qa/default"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("conversation-e2e")
    url, process = start_daphne({
        "LANGHOST_PLUGINS_DIR": plugins_dir_with(tmp, "e2e__agent-runner-qa"),
        "LANGHOST_DATA_DIR": tmp / "data",
    })
    try:
        yield url
    finally:
        stop_daphne(process)


def test_two_messages_two_replies_two_completed_runs(server):
    with httpx.Client(base_url=server, timeout=scaled(60.0)) as http:
        token = http.post("/api/v1/auth/login",
                          json={"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}).json()
        http.headers["Authorization"] = f"Bearer {token['access_token']}"
        # An agent type names a runner LangHost knows: wait until the runtime listed it.
        wait_until(lambda: ECHO in {row["id"] for row in http.get(
            "/api/v1/runners", params={"available": "true"}).json()["data"]},
                   what="the echo runner")
        project_id = http.post("/api/v1/projects",
                               json={"name": "Talk", "slug": "talk"}).json()["id"]
        agent_type = http.post("/api/v1/agent-types", json={
            "name": "Echoer", "slug": "echoer", "runner_id": ECHO})
        assert agent_type.status_code == 201, agent_type.text
        spawned = http.post(f"/api/v1/projects/{project_id}/agents", json={
            "agent_type_id": agent_type.json()["id"], "name": "Ada"})
        assert spawned.status_code == 201, spawned.text
        agent = f"/api/v1/projects/{project_id}/agents/{spawned.json()['id']}"

        opened = http.post(f"{agent}/conversations", json={"title": "e2e"})
        assert opened.status_code == 201, opened.text
        conversation = f"{agent}/conversations/{opened.json()['id']}"
        replies = []
        for text in ("first message", "second message"):
            sent = http.post(f"{conversation}/messages", json={"text": text})
            assert sent.status_code == 201, sent.text
            replies.append(sent.json())

        assert [(r["agent"], r["status"], r["reply"]["content"]) for r in replies] == [
            ("Echoer", "completed", "e2e echo: first message"),
            ("Echoer", "completed", "e2e echo: second message"),
        ]
        runs = http.get("/api/v1/runs", params={"agent_id": spawned.json()["id"]}).json()["data"]
        assert sorted(run["run_id"] for run in runs) == sorted(r["run_id"] for r in replies)
        assert {(run["status"], run["runner_id"]) for run in runs} == {("completed", ECHO)}
        entries = http.get(conversation).json()["entries"]
        assert [(e["author"], e["content"]) for e in entries] == [
            ("user", "first message"), ("Echoer", "e2e echo: first message"),
            ("user", "second message"), ("Echoer", "e2e echo: second message"),
        ]
        metrics = http.get(f"{agent}/metrics").json()
        assert metrics["total_tasks_completed"] == 2
        assert http.get(agent).json()["status"] == "idle"
