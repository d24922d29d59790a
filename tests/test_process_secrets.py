"""A LangHost process keeps the secrets it was started with to itself: each is gone from its
environment (what its children inherit) and from the block `/proc/<pid>/environ` shows, the
admin's password once used, and the process is not dumpable (its environ and memory closed to
other processes of its user). The secrets still work."""

import json

import pytest

from runners.tests.langhost_process import fresh_data_dir, langhost_env, manage

pytestmark = pytest.mark.processes

CANARIES = {"DJANGO_SECRET_KEY": "canary-secret-key-9f2c",
            "LANGHOST_ADMIN_PASSWORD": "Canary-Admin-Passw0rd-77"}
REPORT = """
import ctypes, json, os
from django.conf import settings
from accounts.models import User
from langhost.base.process_secrets import value
print(json.dumps({
    "dumpable": ctypes.CDLL(None).prctl(3, 0, 0, 0, 0),
    "initial": open("/proc/self/environ", "rb").read().decode(errors="replace"),
    "environment": dict(os.environ),
    "secret_key_used": settings.SECRET_KEY == "canary-secret-key-9f2c",
    "password_kept": value("LANGHOST_ADMIN_PASSWORD"),
    "admin_signs_in": User.objects.get(email="root@example.com").check_password(
        "Canary-Admin-Passw0rd-77"),
}))
"""


def test_a_langhost_process_keeps_no_secret_in_any_environment(tmp_path):
    env = langhost_env(fresh_data_dir(tmp_path / "data"), tmp_path / "plugins",
                       LANGHOST_ADMIN_EMAIL="root@example.com", **CANARIES)
    manage("migrate", env=env, timeout=120)

    done = manage("shell", "-c", "from django.core.management import call_command; "
                  f"call_command('ensure_admin'); {REPORT}", env=env, timeout=120)

    report = json.loads(done.stdout.splitlines()[-1])
    assert report["dumpable"] == 0
    seen = report["initial"] + json.dumps(report["environment"])
    assert [name for name, canary in CANARIES.items() if canary in seen] == []
    assert "LANGHOST_ADMIN_EMAIL=root@example.com" in report["initial"]  # the rest left alone
    assert report["secret_key_used"] and report["admin_signs_in"]
    assert report["password_kept"] is None
