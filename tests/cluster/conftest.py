"""The production layout of `deploy/`, started for real: private PostgreSQL and Redis
(`langhost.local_servers`), then two web processes and two runtime workers run with the exact
commands of `deploy/Procfile` and the environment of `deploy/cluster.env`, as `make cluster`
runs them. One cluster serves the whole module; tests that kill a process start it again.
"""

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psycopg
import pytest

from langhost.local_servers import LocalServers
from runners.runtime.process import free_port
from runners.tests.conftest import plugins_dir_with
from runners.tests.langhost_process import descendants, langhost_env
from tests.timing import scaled

pytest.importorskip("channels_redis", reason="the processes talk through Redis: `make install-test`")

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
ADMIN = {"email": "root@example.com", "password": "Cluster-Admin-Passw0rd"}


def procfile() -> dict[str, str]:
    """`deploy/Procfile`: process kind → command."""
    return _entries(DEPLOY / "Procfile", ":")


def env_file() -> dict[str, str]:
    """`deploy/cluster.env`, read as honcho reads it."""
    return _entries(DEPLOY / "cluster.env", "=")


def _entries(path: Path, separator: str) -> dict[str, str]:
    """`key<separator>value` lines, blank lines and comments skipped."""
    entries = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, value = line.split(separator, 1)
            entries[key.strip()] = value.strip()
    return entries


class Process:
    def __init__(self, kind: str, command: str, port: int, env: dict[str, str]):
        self.kind, self.port = kind, port
        self.url = f"http://127.0.0.1:{port}"
        # As honcho runs a Procfile line: through the shell, with $PORT set.
        self.popen = subprocess.Popen(["/bin/sh", "-c", command], cwd=REPO,
                                      env={**env, "PORT": str(port)},
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      start_new_session=True)

    def health(self) -> httpx.Response | None:
        try:
            return httpx.get(f"{self.url}/healthz", timeout=scaled(5))
        except httpx.TransportError:
            return None

    def wait_healthy(self) -> None:
        give_up = time.monotonic() + scaled(90)
        while (answer := self.health()) is None or answer.status_code != 200:
            assert self.popen.poll() is None, f"{self.kind} on {self.port} exited"
            assert time.monotonic() < give_up, f"{self.kind} on {self.port} never got healthy"
            time.sleep(0.2)

    def runs_served(self) -> int:
        return self.health().json()["runs"]["served"]

    def kill(self) -> None:
        self.popen.send_signal(signal.SIGKILL)
        self.popen.wait()

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=scaled(20))
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait()


class Cluster:
    """2 web processes (`web[0]`, `web[1]`) and 2 runtime workers (`workers[0]`, `[1]`)."""

    def __init__(self, servers: LocalServers, tmp: Path):
        self.servers = servers
        data_dir = tmp / "data"
        data_dir.mkdir()
        # Short leases, so a killed process's runs are failed within seconds; long enough that
        # a loaded machine renews them in time.
        self.lease = scaled(10)
        self.env = langhost_env(
            data_dir, plugins_dir_with(tmp, "e2e__agent-runner-qa"), **servers.environ(),
            **env_file(), LANGHOST_RUN_LEASE_SECONDS=str(self.lease),
            LANGHOST_ADMIN_EMAIL=ADMIN["email"], LANGHOST_ADMIN_PASSWORD=ADMIN["password"],
            # Webhooks go to the tests' receiver on 127.0.0.1, retried at once.
            LANGHOST_WEBHOOK_ALLOW_PRIVATE="1", LANGHOST_WEBHOOK_BACKOFF_SECONDS="0.2",
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
        self.commands = procfile()
        self.web = [self.start("web") for _ in range(2)]
        self.workers = [self.start("runtime") for _ in range(2)]
        try:
            for process in self.web + self.workers:
                process.wait_healthy()
        except BaseException:
            self.stop()
            raise
        self.token = httpx.post(f"{self.web[0].url}/api/v1/auth/login", json=ADMIN,
                                timeout=scaled(30)).json()["access_token"]
        self.headers = {"Authorization": f"Bearer {self.token}"}

    def start(self, kind: str, port: int | None = None, env: dict | None = None) -> Process:
        return Process(kind, self.commands[kind], port or free_port(), {**self.env, **(env or {})})

    def restart(self, process: Process) -> Process:
        """A killed process started again, with the same command on the same port."""
        again = self.start(process.kind, process.port)
        again.wait_healthy()
        return again

    def client(self, web: Process) -> httpx.Client:
        return httpx.Client(base_url=web.url, headers=self.headers, timeout=scaled(60))

    def rows(self, sql: str, *params) -> list[tuple]:
        with psycopg.connect(self.servers.postgres.url.replace("postgres://", "postgresql://"),
                             autocommit=True) as connection:
            return connection.execute(sql, params).fetchall()

    def pids(self) -> set[int]:
        """Every process this cluster started, and theirs (runtimes, plugins)."""
        roots = {process.popen.pid for process in self.web + self.workers}
        return roots.union(*(descendants(pid) for pid in roots))

    def stop(self) -> None:
        for process in self.web + self.workers:
            process.stop()


@pytest.fixture(scope="module")
def servers():
    with LocalServers() as started:
        yield started


@pytest.fixture(scope="module")
def cluster(servers, tmp_path_factory):
    started = Cluster(servers, tmp_path_factory.mktemp("cluster"))
    try:
        yield started
    finally:
        started.stop()


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def command_line(pid: int) -> str:
    try:
        return shlex.join(Path(f"/proc/{pid}/cmdline").read_text().split("\0"))
    except OSError:
        return ""
