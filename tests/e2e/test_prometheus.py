"""A real Prometheus scrapes a LangHost over daphne: its `langhost_runs_ended_total` by status
equals the ledger's counts after 50 runs, and the run-duration histogram has its buckets."""

import shutil
import sqlite3
import subprocess
import time
from contextlib import closing

import httpx
import pytest

from runners.runtime.process import free_port
from tests.e2e.conftest import ADMIN_EMAIL, ADMIN_PASSWORD, daphne_with_plugins
from tests.timing import scaled

PROMETHEUS = shutil.which("prometheus")
QA = "plugin:e2e/agent-runner-qa"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(PROMETHEUS is None, reason="needs Debian's prometheus: `make servers`"),
]


def start_prometheus(tmp_path, target: str) -> tuple[subprocess.Popen, str]:
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, scrape_timeout: 1s}\n"
        "scrape_configs:\n"
        f"  - job_name: langhost\n    static_configs: [{{targets: ['{target}']}}]\n")
    port = free_port()
    process = subprocess.Popen(
        [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return process, f"http://127.0.0.1:{port}"


def query(prometheus: str, expression: str) -> dict[str, float]:
    """The instant vector of `expression`, by the value of its one label (or "")."""
    try:
        answer = httpx.get(f"{prometheus}/api/v1/query", params={"query": expression},
                           timeout=scaled(5)).json()
    except (httpx.TransportError, ValueError):
        return {}
    return {next(iter(sample["metric"].values()), ""): float(sample["value"][1])
            for sample in answer.get("data", {}).get("result", [])}


def ledger_counts(data_dir) -> dict[str, float]:
    with closing(sqlite3.connect(data_dir / "langhost.sqlite3")) as database:
        return {status: float(count) for status, count in database.execute(
            "SELECT status, count(*) FROM agent_run GROUP BY status")}


@pytest.mark.slow("waits for Prometheus to scrape twice")
def test_prometheus_sees_the_ledgers_run_counts_and_duration_buckets(tmp_path):
    with daphne_with_plugins(tmp_path, "e2e__agent-runner-qa") as (url, env):
        token = httpx.post(f"{url}/api/v1/auth/login", json={
            "email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}).json()["access_token"]
        api = httpx.Client(base_url=url, timeout=scaled(30),
                           headers={"Authorization": f"Bearer {token}"})
        for n in range(50):
            runner = f"{QA}/failing" if n % 5 == 0 else f"{QA}/default"
            started = api.post("/api/v1/runs", json={"runner_id": runner,
                                                     "input": {"text": f"run {n}"}})
            assert started.status_code == 201, started.text
        expected = ledger_counts(tmp_path / "data")
        prometheus, prometheus_url = start_prometheus(tmp_path, url.removeprefix("http://"))
        try:
            seen, deadline = {}, time.monotonic() + scaled(60)
            while seen != expected and time.monotonic() < deadline:
                time.sleep(0.5)
                seen = query(prometheus_url, "sum by (status) (langhost_runs_ended_total)")
            buckets = query(prometheus_url, 'sum by (le) (langhost_run_duration_seconds_bucket)')
        finally:
            prometheus.terminate()
            prometheus.wait(timeout=scaled(10))

    assert expected == {"completed": 40.0, "failed": 10.0}
    assert seen == expected
    assert buckets["+Inf"] == 50.0 and len(buckets) > 5
    assert buckets["0.005"] <= buckets["1.0"] <= buckets["+Inf"]
