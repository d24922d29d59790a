"""Two processes through Redis: `manage.py runtime` owns the runtime, daphne executes the runs.

The web process (`LANGHOST_RUNTIME_WORKER=true`) keeps the leases of the runs it executes; the
worker reaps the runs whose process died. Leases are shortened to a few seconds.
"""

import select
import shutil
import signal
import sqlite3
import time
from pathlib import Path

import httpx
import pytest

from langhost.local_servers import Redis
from runners.tests.conftest import plugins_dir_with
from runners.tests.langhost_process import fresh_data_dir, langhost_env, popen_manage
from tests.e2e.conftest import ADMIN_EMAIL, ADMIN_PASSWORD, start_daphne, stop_daphne
from tests.timing import scaled

pytest.importorskip("channels_redis", reason="the two processes talk through Redis: `make install-test`")
REDIS_SERVER = shutil.which("redis-server")
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(REDIS_SERVER is None, reason="needs redis-server: `make servers`"),
]

SLOW_RUNNER = "plugin:e2e/agent-runner-qa/slow"


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    server = Redis(tmp_path_factory.mktemp("redis"))
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="module")
def shared(tmp_path_factory, redis_url) -> dict:
    """What both processes share: the database, the plugins, Redis and the lease length."""
    tmp = tmp_path_factory.mktemp("worker-mode")
    return {"LANGHOST_DATA_DIR": str(fresh_data_dir(tmp / "data")),
            "LANGHOST_PLUGINS_DIR": str(plugins_dir_with(tmp, "e2e__agent-runner-qa")),
            "REDIS_URL": redis_url, "LANGHOST_RUN_LEASE_SECONDS": str(scaled(3))}


@pytest.fixture(scope="module")
def runtime_worker(shared):
    env = langhost_env(Path(shared["LANGHOST_DATA_DIR"]), Path(shared["LANGHOST_PLUGINS_DIR"]),
                       REDIS_URL=shared["REDIS_URL"],
                       LANGHOST_RUN_LEASE_SECONDS=shared["LANGHOST_RUN_LEASE_SECONDS"])
    worker = popen_manage("runtime", env=env)
    try:
        ready, _, _ = select.select([worker.stdout], [], [], scaled(60))
        line = worker.stdout.readline() if ready else ""
        assert line.startswith("runtime stdio ready;") and SLOW_RUNNER in line, line
        yield worker
    finally:
        worker.terminate()
        worker.wait(timeout=10)


@pytest.fixture
def web(shared, runtime_worker):
    """A daphne of its own (so its own owner id) that reaches the runtime through Redis."""
    url, process = start_daphne({**shared, "LANGHOST_RUNTIME_WORKER": "true"})
    try:
        with httpx.Client(base_url=url, timeout=scaled(30)) as client:
            token = client.post("/api/v1/auth/login",
                                json={"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD})
            client.headers["Authorization"] = f"Bearer {token.json()['access_token']}"
            client.process = process
            yield client
    finally:
        stop_daphne(process)


def run_row(shared: dict, run_id: str) -> dict:
    database = Path(shared["LANGHOST_DATA_DIR"]) / "langhost.sqlite3"
    with sqlite3.connect(database) as connection:
        connection.row_factory = sqlite3.Row
        return dict(connection.execute(
            "SELECT status, status_reason, execution_owner_id, started_at, finished_at "
            "FROM agent_run WHERE run_id = ?", [run_id]).fetchone())


def test_a_run_longer_than_the_lease_completes(web, shared):
    lease = float(shared["LANGHOST_RUN_LEASE_SECONDS"])
    started = time.monotonic()
    response = web.post("/api/v1/runs", json={"runner_id": SLOW_RUNNER,
                                              "input": {"text": f"deltas:5:{lease / 3}"}})

    assert response.status_code == 201, response.text
    outcome = response.json()
    assert time.monotonic() - started > lease
    assert outcome["status"] == "completed", outcome
    assert [m["type"] for m in outcome["messages"]].count("message.delta") == 5
    # Executed (and kept alive) by the web process, not by the runtime's owner.
    assert f":{web.process.pid}:" in run_row(shared, outcome["run_id"])["execution_owner_id"]


def test_a_run_whose_web_process_is_killed_is_reaped_by_the_next_reaper_tick(web, shared):
    with web.stream("POST", "/api/v1/runs?stream=1",
                    json={"runner_id": SLOW_RUNNER, "input": {"text": "deltas:60:1"}}) as stream:
        frames = stream.iter_lines()
        run_id = httpx.Response(200, content=next(frames)).json()["run_id"]
        next(frames)  # the first delta: the run is running
        web.process.send_signal(signal.SIGKILL)
        killed = time.monotonic()
    web.process.wait()

    # The web process was of this host: it is known gone, its lease need not run out first.
    lease = float(shared["LANGHOST_RUN_LEASE_SECONDS"])
    reaped_within = lease / 6 + scaled(1.5)  # a reaper's tick, slack
    while (row := run_row(shared, run_id))["status"] == "running":
        assert time.monotonic() - killed < reaped_within, "not reaped in time"
        time.sleep(0.1)

    assert row["status"] == "failed", row
    assert row["status_reason"].startswith("host.gone:")
