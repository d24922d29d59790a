"""`langhost.settings` for a test session, with a data dir of its own (pytest's settings).

The session's test database, secret key, runtime files and migrated template go to a fresh temp
dir: tests never write into `./data` or the developer's cache, and sessions running side by
side never share a test database. Processes the tests start get their own data dirs
(tests/e2e/conftest.py), or inherit this one.
"""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

from langhost.base import data_dir

_session_data_dir = tempfile.mkdtemp(prefix="langhost-tests-")
atexit.register(shutil.rmtree, _session_data_dir, ignore_errors=True)
os.environ["LANGHOST_DATA_DIR"] = _session_data_dir
# The migrated template (langhost/base/migrated_template.py) of the servers the session starts:
# the session's, not the developer's cache.
os.environ["LANGHOST_CACHE_DIR"] = str(Path(_session_data_dir) / "cache")
data_dir.prepare()  # what manage.py and asgi.py do for a real process

from langhost.settings import *  # noqa: E402, F403

# A test that reaches `langhost.asgi.application` starts this process's own runtime (as the
# first request of a server would): with no plugins, nothing it discovers is written into the
# database other tests share. Tests that need plugins bring their own gateway and plugins dir.
LANGHOST_PLUGINS_DIR = Path(_session_data_dir) / "no-plugins"
LANGHOST_PLUGINS_DIR.mkdir()

# The session's runtimes (shared fixtures, a test's own) all write into one test database; a
# runtime's periodic rediscovery would record the plugins and runners only the others have as
# gone while a test reads them. Each test's gateway discovers when it starts, as in production.
LANGHOST_RUNTIME_REFRESH_SECONDS = 0

# Tests write state (in bytes) and start runs as fast as they like; the throttles' own tests set their
# rates (runners/tests/test_conversations_api.py, test_messages_api.py).
REST_FRAMEWORK = {**REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {  # noqa: F405
    **REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"],  # noqa: F405
    "state-writes": f"{2**40}/second", "run-starts": "10000/second"}}

# No background work (runners/work.py) in the tests' own process: its loops would touch the
# database between tests, from the thread the next test's
# own database work shares (pytest-django refuses it there, leaving a connection half-made).
# Knowledge tests ingest with `manage.py ingest_knowledge` or the worker; the liveness tests
# reap themselves.
LANGHOST_KNOWLEDGE_INGESTION = False
LANGHOST_REAP_STALE_RUNS = False

# Webhooks: delivered by the tests themselves (`deliver_due`); the tests' receivers listen on
# loopback.
LANGHOST_WEBHOOK_DELIVERY = False
LANGHOST_BACKGROUND_WORK = False
LANGHOST_WEBHOOK_ALLOW_PRIVATE = True
