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
# Migrated databases to copy, made once per test process: by admin account (none: `()`).
_templates: dict[tuple, Path] = {}

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


def fresh_data_dir(path: Path, admin: dict[str, str] | None = None) -> Path:
    """A new data dir holding only a migrated database, with `admin`'s account if given (a
    copy: each template is migrated once per test process)."""
    key = tuple(sorted(admin.items())) if admin else ()
    if key not in _templates:
        template = Path(tempfile.mkdtemp(prefix="langhost-migrated-"))
        atexit.register(shutil.rmtree, template, ignore_errors=True)
        script = "from django.core.management import call_command; " \
                 "call_command('migrate', interactive=False, verbosity=0)"
        accounts = {}
        if admin:
            script += "; call_command('ensure_admin')"
            accounts = {"LANGHOST_ADMIN_EMAIL": admin["email"],
                        "LANGHOST_ADMIN_PASSWORD": admin["password"]}
        done = manage("shell", "-c", script, timeout=120,
                      env=langhost_env(template, template / "p", **accounts))
        assert done.returncode == 0, done.stderr
        _templates[key] = template
    path.mkdir(parents=True, exist_ok=True)
    shutil.copy2(_templates[key] / "langhost.sqlite3", path / "langhost.sqlite3")
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
