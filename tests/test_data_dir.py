"""The data dir is made by the entry points, never by importing the settings."""

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from langhost.base import data_dir

pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parents[1]


def without_secret_key(**overrides) -> dict:
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SECRET_KEY"}
    return {**env, **overrides}


def test_importing_the_settings_writes_nothing(tmp_path):
    target = tmp_path / "data"

    subprocess.run([sys.executable, "-c", "import langhost.settings"], cwd=ROOT, check=True,
                   env=without_secret_key(LANGHOST_DATA_DIR=str(target)), timeout=60)

    assert not target.exists()


def test_manage_py_makes_the_dir_and_a_key_that_lasts(tmp_path):
    target = tmp_path / "data"
    show_key = "from django.conf import settings; print(settings.SECRET_KEY)"
    env = without_secret_key(LANGHOST_DATA_DIR=str(target),
                             DJANGO_SETTINGS_MODULE="langhost.settings")

    keys = [subprocess.run([sys.executable, "manage.py", "shell", "-c", show_key], cwd=ROOT,
                           env=env, capture_output=True, text=True, check=True,
                           timeout=60).stdout.splitlines()[-1] for _ in range(2)]

    assert keys[0] and keys[0] == keys[1] == data_dir.stored_secret_key(target)
    assert stat.S_IMODE((target / "secret_key").stat().st_mode) == 0o600
    assert not list(target.glob(".secret_key-*"))  # no draft left behind


def test_an_explicit_secret_key_is_not_written(tmp_path, monkeypatch):
    monkeypatch.setenv("LANGHOST_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DJANGO_SECRET_KEY", "from-the-environment")

    data_dir.prepare()

    assert list((tmp_path / "data").iterdir()) == []


def test_the_test_session_keeps_out_of_the_repositorys_data_dir(settings):
    session_dir = Path(settings.DATA_DIR)

    assert not session_dir.is_relative_to(ROOT)
    if settings.DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
        assert Path(settings.DATABASES["default"]["TEST"]["NAME"]).parent == session_dir
