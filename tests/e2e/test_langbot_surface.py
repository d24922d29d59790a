"""LangBot's own E2E entry points, served by LangHost over real daphne with the QA plugin."""

import json
import shutil
import time

import httpx
import pytest

from tests.e2e.conftest import start_daphne, stop_daphne
from tests.timing import scaled

pytestmark = pytest.mark.e2e

QA_PLUGIN = "tests/fixtures/plugins/e2e__agent-runner-qa"
ECHO = "plugin:e2e/agent-runner-qa/default"
OWNER = {"user": "owner@example.com", "password": "Owner-Passw0rd-1"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A fresh LangHost with no user yet and the QA plugin in its plugins dir."""
    tmp = tmp_path_factory.mktemp("langbot-surface")
    shutil.copytree(QA_PLUGIN, tmp / "plugins" / "e2e__agent-runner-qa")
    url, process = start_daphne({
        "LANGHOST_DATA_DIR": tmp / "data", "LANGHOST_PLUGINS_DIR": tmp / "plugins",
        "LANGHOST_ADMIN_EMAIL": None, "LANGHOST_ADMIN_PASSWORD": None,
    })
    try:
        with httpx.Client(base_url=url, timeout=scaled(30.0)) as client:
            yield client
    finally:
        stop_daphne(process)


@pytest.fixture(scope="module")
def token(server):
    assert server.post("/api/v1/user/init", json=OWNER).json()["code"] == 0
    answer = server.post("/api/v1/user/auth", json=OWNER).json()
    assert answer["code"] == 0
    return answer["data"]["token"]


def test_second_init_changes_nothing(server, token):
    answer = server.post("/api/v1/user/init",
                         json={"user": "x@example.com", "password": "Other-Pass-9"}).json()

    assert answer["code"] == 1 and answer["msg"]
    assert server.post("/api/v1/user/auth", json={"user": "x@example.com",
                                                   "password": "Other-Pass-9"}).status_code == 401


def test_auth_token_is_accepted_by_the_rest_api(server, token):
    me = server.get("/api/v1/auth/me", headers={"Authorization": f"Bearer {token}"})

    assert me.status_code == 200 and me.json()["email"] == OWNER["user"]


def test_pipeline_metadata_lists_the_plugin_runner(server, token):
    headers = {"Authorization": f"Bearer {token}"}
    deadline = time.monotonic() + scaled(15)
    while True:  # the runtime starts with the server's first request
        configs = server.get("/api/v1/pipelines/_/metadata", headers=headers).json()["data"]["configs"]
        ai = next(c for c in configs if c["name"] == "ai")
        stage = next(s for s in ai["stages"] if s["name"] == "runner")
        options = next(item for item in stage["config"] if item["name"] == "id")["options"]
        if ECHO in {option["name"] for option in options} or time.monotonic() > deadline:
            break
        time.sleep(0.3)

    assert ECHO in {option["name"] for option in options}


def test_debug_run_agent_returns_the_runners_completed_message(server, token):
    response = server.post(
        "/api/v1/system/debug/plugin/action", headers={"Authorization": f"Bearer {token}"},
        json={"action": "run_agent", "timeout": 30, "data": {
            "plugin_author": "e2e", "plugin_name": "agent-runner-qa", "runner_name": "default",
            "context": {"event": {"event_id": "debug-e2e-1", "event_type": "message.received"},
                        "conversation": {"conversation_id": "debug-conv"},
                        "input": {"text": "hello debug"}}}})

    answer = response.json()
    assert answer["code"] == 0, answer
    assert answer["data"]["type"] == "message.completed"
    assert answer["data"]["data"]["message"]["content"] == "e2e echo: hello debug"


def test_streamed_run_of_a_plugin_runner_over_http(server, token):
    with server.stream("POST", "/api/v1/runs?stream=1", headers={"Authorization": f"Bearer {token}"},
                       json={"runner_id": ECHO, "input": {"text": "streamed"}}) as response:
        frames = [json.loads(line) for line in response.iter_lines() if line]

    assert response.status_code == 201
    assert frames[0]["type"] == "run.started"
    assert frames[1]["data"]["message"]["content"] == "e2e echo: streamed"
    assert frames[-1] == {**frames[-1], "type": "run.finished", "status": "completed"}
