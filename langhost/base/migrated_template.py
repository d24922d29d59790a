"""A new SQLite database starts as a copy of a migrated one, not by replaying every migration.

The first time `migrate` makes a database from nothing, the result (the schema, content types,
permissions and built-in runners: no account, no secret) is kept in the cache
(`LANGHOST_CACHE_DIR`, by default `$XDG_CACHE_HOME/langhost` or `~/.cache/langhost`) under a
digest of every migration file and Django's version. A later fresh data dir copies it and
`migrate` then only checks it, which is a fraction of the time. Any change to a migration is
another digest, so another template. Without a writable cache, or with a template that cannot
be read, the database is migrated as always. PostgreSQL is always migrated. A copy is its
owner's alone (mode 0600), as the data dir's secret key is.
"""

import contextlib
import hashlib
import logging
import os
import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path

import django
from django.apps import apps
from django.conf import settings
from django.core.management import call_command

logger = logging.getLogger(__name__)


def cache_dir() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "langhost"
    return Path(os.environ.get("LANGHOST_CACHE_DIR") or default)


def migrate() -> None:
    """`migrate`, a database that does not exist yet first copied from the template."""
    database = _sqlite_file()
    if database is None or database.exists():
        _migrate()
        return
    template = cache_dir() / f"migrated-{_digest()}.sqlite3"
    if template.exists():
        try:
            _copy(template, database, replace=False)
        except FileExistsError:  # made meanwhile by a process beside this one
            pass
        except (OSError, sqlite3.Error) as exc:  # damaged, or a file system without links
            logger.warning("the migrated template %s is not used (%s): migrating", template, exc)
            with contextlib.suppress(OSError):
                template.unlink()
        _migrate()
        return
    _migrate()
    try:
        template.parent.mkdir(parents=True, exist_ok=True)
        _copy(database, template, replace=True)
    except (OSError, sqlite3.Error) as exc:  # a read-only home, say: the next one migrates too
        logger.info("the migrated database is not kept as a template: %s", exc)


def _migrate() -> None:
    call_command("migrate", interactive=False, verbosity=0)


def _sqlite_file() -> Path | None:
    database = settings.DATABASES["default"]
    if database["ENGINE"] != "django.db.backends.sqlite3":
        return None
    return Path(database["NAME"])


def _digest() -> str:
    """Every migration file of every app, and Django's version."""
    digest = hashlib.sha256(django.get_version().encode())
    for app in sorted(apps.get_app_configs(), key=lambda app: app.label):
        for path in sorted(Path(app.path).glob("migrations/*.py")):
            digest.update(f"{app.label}/{path.name}".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _copy(source: Path, target: Path, replace: bool) -> None:
    """SQLite's online backup (a database in WAL mode is copied whole, and the copy keeps a
    rollback journal: reading it needs no shared-memory file beside it), written aside and
    moved into place: a process starting beside this one never sees half a database. Without
    `replace`, a target that exists meanwhile raises FileExistsError."""
    with tempfile.NamedTemporaryFile(dir=target.parent, prefix=f".{target.name}-",
                                     delete=False) as draft:
        pass
    try:
        with closing(sqlite3.connect(source)) as reading, \
                closing(sqlite3.connect(draft.name)) as writing:
            reading.backup(writing)
            writing.execute("PRAGMA journal_mode=DELETE")
        if replace:
            os.replace(draft.name, target)
        else:
            os.link(draft.name, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(draft.name)
