"""Webhooks from a real `manage.py`-style daphne, delivered by the serving process in its
background: a run's outcome reaches a real receiver on 127.0.0.1 once acknowledged, signed
with the project's secret, after a first answer of 500 — and not again."""

import hashlib
import hmac
import json

import httpx
import pytest

from runners.webhooks.tests.test_webhooks import Receiver
from tests.e2e.conftest import daphne_with_plugins
from tests.timing import scaled

pytestmark = pytest.mark.e2e


def test_the_serving_process_delivers_a_runs_outcome_once_after_a_500(
        tmp_path, admin_credentials):
    hook = Receiver(500)
    env = {"LANGHOST_WEBHOOK_ALLOW_PRIVATE": "1", "LANGHOST_WEBHOOK_BACKOFF_SECONDS": "0.2"}
    try:
        with daphne_with_plugins(tmp_path, **env) as (url, _), httpx.Client(
                base_url=url, timeout=scaled(30)) as http:
            token = http.post("/api/v1/auth/login", json=admin_credentials).json()["access_token"]
            http.headers["Authorization"] = f"Bearer {token}"
            project = http.post("/api/v1/projects", json={"name": "Hooks", "slug": "hooks"}).json()
            secret = http.post(f"/api/v1/projects/{project['id']}/webhook/rotate-secret").json()[
                "secret"]
            echo = http.post("/api/v1/agent-types", json={
                "name": "Echo", "slug": "echo", "runner_id": "builtin:echo"}).json()
            agent = http.post(f"/api/v1/projects/{project['id']}/agents", json={
                "agent_type_id": echo["id"], "name": "Echo"}).json()
            run = http.post("/api/v1/runs", json={
                "agent_id": agent["id"], "input": {"text": "hi"}, "webhook": hook.url}).json()
            hook.wait_for(2, scaled(30))
    finally:
        hook.server.shutdown()

    assert len(hook.received) == 2  # the 500, then the one acknowledged
    headers, body = hook.received[1]
    signed = hmac.new(secret.encode(), f"{headers['X-LangHost-Timestamp']}.".encode() + body,
                      hashlib.sha256).hexdigest()
    assert headers["X-LangHost-Signature"] == f"sha256={signed}"
    assert json.loads(body)["run_id"] == run["run_id"]
