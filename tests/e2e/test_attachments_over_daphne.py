"""A message's files, read by a plugin runner over real daphne: a small file inline and
through the link signed for the run, a large one through the link only, both byte for byte
the upload (sha256); the link needs no credentials while the run is active and is refused
after it ends (410) and for another run (404)."""

import base64
import hashlib
import json
import os
import time

import httpx
import pytest

from tests.e2e.conftest import daphne_with_plugins
from tests.timing import scaled

pytestmark = pytest.mark.e2e

READER = "plugin:e2e/agent-runner-llm/attachment-reader"
SMALL = b"Ferry times: 7:15 and 9:40.\n"
LARGE = os.urandom(200 * 1024)  # over the inline limit: through the link only


@pytest.fixture
def server(tmp_path):
    with daphne_with_plugins(tmp_path, "e2e__agent-runner-llm") as (url, _):
        yield url


def test_a_runner_reads_its_files_inline_and_through_its_runs_link(server, admin_credentials):
    with httpx.Client(base_url=server, timeout=scaled(30)) as http:
        token = http.post("/api/v1/auth/login", json=admin_credentials).json()["access_token"]
        http.headers["Authorization"] = f"Bearer {token}"
        deadline = time.monotonic() + scaled(60)
        while not any(runner["id"] == READER
                      for runner in http.get("/api/v1/runners").json()["data"]):
            assert time.monotonic() < deadline, "the runner plugin did not come up"
            time.sleep(0.1)
        project = http.post("/api/v1/projects", json={"name": "Files", "slug": "files"}).json()
        reader = http.post("/api/v1/agent-types", json={
            "name": "Reader", "slug": "reader", "runner_id": READER}).json()
        agents = f"/api/v1/projects/{project['id']}/agents"
        agent = http.post(agents, json={"agent_type_id": reader["id"], "name": "Reader"}).json()
        conversations = f"{agents}/{agent['id']}/conversations"
        conversation = http.post(conversations, json={}).json()
        messages = f"{conversations}/{conversation['id']}/messages"

        def send(*files):
            answer = http.post(messages, json={"text": "read these", "attachments": [
                {"name": name, "mime_type": "application/octet-stream",
                 "data": base64.b64encode(data).decode()} for name, data in files]}).json()
            assert answer["status"] == "completed", answer
            return answer["run_id"], json.loads(answer["reply"]["content"])

        run_id, (small, large) = send(("times.txt", SMALL), ("noise.bin", LARGE))
        other_run, _ = send(("again.txt", SMALL))

    assert small["inline_sha256"] == small["url_sha256"] == hashlib.sha256(SMALL).hexdigest()
    assert large["inline_sha256"] is None
    assert large["url_sha256"] == hashlib.sha256(LARGE).hexdigest()
    assert f"/api/v1/runs/{run_id}/attachments/" in small["url"]
    assert httpx.get(small["url"]).status_code == 410  # the run has ended
    assert httpx.get(small["url"].replace(run_id, other_run)).status_code == 404
