"""Real daphne processes for end-to-end tests.

`start_daphne(env_overrides)` prepares a fresh data dir (a copy of a database migrated once,
with the admin; on PostgreSQL, migrate + ensure_admin in a subprocess), starts daphne on a free port and waits until `/admin/login/` answers;
`stop_daphne(process)` ends it. The session-scoped `daphne_server` fixture wraps both;
override the `daphne_env` fixture (or call `start_daphne` yourself) for other settings.
"""

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from runners.runtime.process import free_port
from runners.tests.langhost_process import fresh_data_dir
from tests.timing import scaled

ROOT = Path(__file__).resolve().parents[2]
_VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = _VENV_PYTHON if _VENV_PYTHON.exists() else Path(sys.executable)
ADMIN_EMAIL = "root@example.com"
ADMIN_PASSWORD = "E2e-Admin-Passw0rd"


def daphne_environ(env_overrides: dict | None = None) -> dict:
    """The process environment: this one, minus anything pointing at shared state.

    A fresh temp `LANGHOST_DATA_DIR` (so SQLite and the secret key are private to the
    server) and the e2e admin account, unless `env_overrides` says otherwise. A value
    of None in `env_overrides` removes that variable.
    """
    # LANGHOST_DATA_DIR is the test session's own (tests/settings.py), never the server's.
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "REDIS_URL", "LANGHOST_RUNTIME_URL", "PYTEST_CURRENT_TEST",
                       "LANGHOST_DATA_DIR"}
    }
    env.update(
        DJANGO_SETTINGS_MODULE="langhost.settings",
        LANGHOST_ADMIN_EMAIL=ADMIN_EMAIL,
        LANGHOST_ADMIN_PASSWORD=ADMIN_PASSWORD,
        PYTHONUNBUFFERED="1",
    )
    for key, value in (env_overrides or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = str(value)
    if "LANGHOST_DATA_DIR" not in env:
        env["LANGHOST_DATA_DIR"] = tempfile.mkdtemp(prefix="langhost-e2e-")
    return env


# One Django start-up for both steps (each `manage.py` start costs seconds).
PREPARE = (
    "from django.core.management import call_command; "
    "call_command('migrate', interactive=False, verbosity=0); "
    "call_command('ensure_admin')"
)


def prepare_database(env: dict) -> None:
    """`manage.py migrate` then `ensure_admin`, in a subprocess with `env`."""
    result = subprocess.run(
        [str(PYTHON), "manage.py", "shell", "-c", PREPARE],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=scaled(120),
    )
    if result.returncode != 0:
        raise RuntimeError(f"migrate / ensure_admin failed:\n{result.stdout}\n{result.stderr}")


def stop_daphne(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=scaled(10))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=scaled(5))


def start_daphne(env_overrides: dict | None = None, migrate: bool = True):
    """Start daphne serving LangHost; returns `(base_url, process)`.

    The process has `.data_dir` and `.log_path` attributes; its output goes to the log,
    which is shown if startup fails.
    """
    env = daphne_environ(env_overrides)
    data_dir = Path(env["LANGHOST_DATA_DIR"])
    data_dir.mkdir(parents=True, exist_ok=True)
    if migrate and "DATABASE_URL" not in env and not (data_dir / "langhost.sqlite3").exists():
        admin = {"email": env["LANGHOST_ADMIN_EMAIL"],
                 "password": env["LANGHOST_ADMIN_PASSWORD"]} if "LANGHOST_ADMIN_EMAIL" in env else None
        fresh_data_dir(data_dir, admin)
    elif migrate:
        prepare_database(env)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = data_dir / f"daphne-{port}.log"
    log = open(log_path, "wb")
    process = subprocess.Popen(
        [str(PYTHON), "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
         "langhost.asgi:application"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    log.close()
    process.data_dir = data_dir
    process.log_path = log_path
    startup_timeout = scaled(20.0)
    deadline = time.monotonic() + startup_timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"daphne exited with {process.returncode}:\n{log_path.read_text()}")
        try:
            if httpx.get(f"{url}/admin/login/", timeout=scaled(1.0)).status_code == 200:
                return url, process
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            stop_daphne(process)
            raise RuntimeError(
                f"daphne did not answer /admin/login/ within {startup_timeout:.0f}s:\n"
                f"{log_path.read_text()}"
            )
        time.sleep(0.1)


@pytest.fixture(scope="session")
def daphne_env(tmp_path_factory) -> dict:
    """Environment overrides for `daphne_server`; override this fixture to change them."""
    return {"LANGHOST_DATA_DIR": str(tmp_path_factory.mktemp("langhost-data"))}


@pytest.fixture(scope="session")
def daphne_server(daphne_env):
    """The base URL of a LangHost daphne serving a fresh database."""
    url, process = start_daphne(daphne_env)
    try:
        yield url
    finally:
        stop_daphne(process)


@pytest.fixture
def http(daphne_server):
    with httpx.Client(base_url=daphne_server, timeout=scaled(10.0)) as client:
        yield client


@pytest.fixture(scope="session")
def admin_credentials():
    return {"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}


@contextlib.contextmanager
def daphne_with_plugins(tmp_path: Path, *plugins: str, **env: str):
    """A daphne on a fresh data dir in `tmp_path`, loading copies of the named fixture plugins;
    yields `(base_url, its environment)` (for `manage.py` commands on its database)."""
    folder = tmp_path / "plugins"
    for name in plugins:
        shutil.copytree(ROOT / "tests" / "fixtures" / "plugins" / name, folder / name)
    overrides = {"LANGHOST_DATA_DIR": str(tmp_path / "data"), "LANGHOST_PLUGINS_DIR": str(folder),
                 **env}
    url, process = start_daphne(overrides)
    try:
        yield url, daphne_environ(overrides)
    finally:
        stop_daphne(process)
