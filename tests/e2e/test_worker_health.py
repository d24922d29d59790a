"""`manage.py runtime --health-port N`: the runtime worker says whether it can serve."""

import time
from pathlib import Path

import httpx
import pytest

from runners.runtime.process import free_port
from runners.tests.langhost_process import langhost_env, popen_manage
from tests.e2e.test_worker_mode import REDIS_SERVER, redis_url, shared  # noqa: F401 (fixtures)
from tests.timing import scaled

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(REDIS_SERVER is None, reason="needs redis-server: `make servers`"),
]


def start_worker(setting: dict, **extra):
    port = free_port()
    env = langhost_env(Path(setting["LANGHOST_DATA_DIR"]), Path(setting["LANGHOST_PLUGINS_DIR"]),
                       REDIS_URL=setting["REDIS_URL"], **extra)
    return popen_manage("runtime", "--health-port", str(port), env=env), port


def health(port: int):
    try:
        response = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=scaled(5))
    except httpx.TransportError:
        return None
    return response


def wait_for(port: int, status: int):
    deadline = time.monotonic() + scaled(60)
    while True:
        response = health(port)
        if response is not None and response.status_code == status:
            return response.json()
        assert time.monotonic() < deadline, f"no {status} from /healthz: {response}"
        time.sleep(0.2)


def stop(worker):
    worker.terminate()
    worker.wait(timeout=scaled(10))


def test_a_worker_whose_runtime_is_ready_answers_200(shared):  # noqa: F811
    worker, port = start_worker(shared, LANGHOST_METRICS_TOKEN="scrape-secret")
    try:
        body = wait_for(port, 200)
        refused = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=scaled(5))
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=scaled(5),
                            headers={"Authorization": "Bearer scrape-secret"})
    finally:
        stop(worker)

    # Its metrics beside its health: its runtime link up, for the token's bearer only.
    assert refused.status_code == 403 and metrics.status_code == 200
    assert "langhost_runtime_link_up 1.0" in metrics.text.splitlines()

    assert body["status"] == "ok"
    assert (body["database"], body["channel_layer"], body["runtime"], body["queue"]) == \
        ("ok", "ok", "ok", "ok")
    assert body["runtime_link"]["state"] == "ready"
    assert body["runtime_link"]["mode"] == "stdio"


def test_a_worker_that_cannot_reach_its_runtime_answers_503_saying_so(shared):  # noqa: F811
    worker, port = start_worker(shared, LANGHOST_RUNTIME_URL=f"ws://127.0.0.1:{free_port()}")
    try:
        body = wait_for(port, 503)
        assert httpx.get(f"http://127.0.0.1:{port}/other", timeout=scaled(5)).status_code == 404
    finally:
        stop(worker)

    assert body["status"] == "unavailable"
    assert body["runtime"].startswith("down:") and body["database"] == "ok"
    assert body["runtime_link"]["mode"] == "ws"
