"""Running `manage.py` as its own process, against a fresh data dir (not a test)."""

import atexit
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

import httpx

from tests.timing import scaled

REPO = Path(__file__).resolve().parents[2]
_migrated: Path | None = None

# Settings a developer's shell may carry that would point the child elsewhere.
_FOREIGN = ("LANGHOST_RUNTIME_URL", "LANGHOST_RUNTIME_TOKEN", "LANGHOST_RUNTIME_WORKER",
            "DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")


def langhost_env(data_dir: Path, plugins_dir: Path, **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in _FOREIGN}
    env.update(LANGHOST_DATA_DIR=str(data_dir), LANGHOST_PLUGINS_DIR=str(plugins_dir), **extra)
    return env


def manage(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=scaled(timeout), check=False)


def popen_manage(*args: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "manage.py", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)


def fresh_data_dir(path: Path) -> Path:
    """A new data dir holding only a migrated database (migrated once per test process)."""
    global _migrated
    if _migrated is None:
        template = Path(tempfile.mkdtemp(prefix="langhost-migrated-"))
        atexit.register(shutil.rmtree, template, ignore_errors=True)
        done = manage("migrate", "--no-input", "-v0", env=langhost_env(template, template / "p"))
        assert done.returncode == 0, done.stderr
        _migrated = template
    path.mkdir(parents=True)
    shutil.copy2(_migrated / "langhost.sqlite3", path / "langhost.sqlite3")
    return path


def descendants(pid: int) -> set[int]:
    """Every live process below `pid`, read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


ADMIN = {"email": "root@example.com", "password": "Serve-Admin-Passw0rd"}


def start_serve(data_dir: Path, plugins_dir: Path, port: int) -> subprocess.Popen:
    """`manage.py serve` on `port`, with the `ADMIN` account; see `wait_until_serving`."""
    env = langhost_env(data_dir, plugins_dir, LANGHOST_ADMIN_EMAIL=ADMIN["email"],
                       LANGHOST_ADMIN_PASSWORD=ADMIN["password"])
    return popen_manage("serve", "--port", str(port), env=env)


def wait_until_serving(http, langhost: subprocess.Popen) -> str:
    """Wait until `http` (an httpx client on the server) signs in; the access token."""
    give_up = time.monotonic() + scaled(30)
    while True:
        assert langhost.poll() is None, "manage.py serve exited"
        try:
            login = http.post("/api/v1/auth/login", json=ADMIN)
            if login.status_code == 200:
                return login.json()["access_token"]
        except httpx.TransportError:
            pass
        assert time.monotonic() < give_up, "manage.py serve never answered"
        time.sleep(0.05)


def ledger_rows(data_dir: Path, sql: str, *params) -> list[tuple]:
    """Rows of the server's own database (not the test's)."""
    with closing(sqlite3.connect(data_dir / "langhost.sqlite3", timeout=30)) as db:
        return db.execute(sql, params).fetchall()
