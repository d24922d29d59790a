"""A new SQLite database starts as a copy of a migrated one (`langhost/base/migrated_template.py`):
the first fresh data dir's database is kept, the next one copies it and is complete."""

import sqlite3
from contextlib import closing

import pytest

from runners.tests.langhost_process import langhost_env, manage

pytestmark = pytest.mark.processes

MIGRATE = "from langhost.base import migrated_template; migrated_template.migrate()"


def migrate_fresh(data_dir, cache_dir) -> None:
    done = manage("shell", "-c", MIGRATE, timeout=120, env=langhost_env(
        data_dir, data_dir / "plugins", LANGHOST_CACHE_DIR=str(cache_dir)))
    assert done.returncode == 0, done.stderr


def rows(database, sql: str) -> list[tuple]:
    with closing(sqlite3.connect(database)) as db:
        return db.execute(sql).fetchall()


def test_the_first_fresh_database_becomes_the_template_the_next_one_copies(tmp_path):
    cache = tmp_path / "cache"
    migrate_fresh(tmp_path / "first", cache)
    (template,) = cache.glob("migrated-*.sqlite3")
    with closing(sqlite3.connect(template)) as db, db:  # a mark only a copy carries
        db.execute("INSERT INTO django_content_type (app_label, model) VALUES ('mark', 'copy')")

    migrate_fresh(tmp_path / "second", cache)

    second = tmp_path / "second" / "langhost.sqlite3"
    assert rows(second, "SELECT model FROM django_content_type WHERE app_label = 'mark'") == [
        ("copy",)]
    applied = "SELECT app, name FROM django_migrations ORDER BY app, name"
    assert rows(second, applied) == rows(tmp_path / "first" / "langhost.sqlite3", applied)
    assert rows(template, "SELECT count(*) FROM accounts_user") == [(0,)]  # no account kept


def test_an_existing_database_is_migrated_where_it_is(tmp_path):
    cache = tmp_path / "cache"
    migrate_fresh(tmp_path / "data", cache)
    database = tmp_path / "data" / "langhost.sqlite3"
    with closing(sqlite3.connect(database)) as db, db:
        db.execute("INSERT INTO django_content_type (app_label, model) VALUES ('mine', 'kept')")

    migrate_fresh(tmp_path / "data", cache)

    assert rows(database, "SELECT model FROM django_content_type WHERE app_label = 'mine'") == [
        ("kept",)]
    assert len(list(cache.glob("migrated-*.sqlite3"))) == 1


def test_a_damaged_template_is_set_aside_and_the_database_migrated(tmp_path):
    cache = tmp_path / "cache"
    migrate_fresh(tmp_path / "first", cache)
    (template,) = cache.glob("migrated-*.sqlite3")
    template.write_bytes(b"not a database at all")

    migrate_fresh(tmp_path / "second", cache)

    applied = "SELECT app, name FROM django_migrations ORDER BY app, name"
    assert rows(tmp_path / "second" / "langhost.sqlite3", applied) == rows(
        tmp_path / "first" / "langhost.sqlite3", applied)
    assert not template.exists()
