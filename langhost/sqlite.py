"""SQLite that can load extensions (`sqlite-vec`, the vector search of knowledge bases).

Python built without loadable-extension support (pyenv's default build, say) cannot load
one into the standard library's SQLite. There, `pysqlite3` (its own SQLite, extensions
enabled) stands in for the standard module before Django's SQLite backend imports it; a
Python whose own `sqlite3` can load extensions keeps it.
"""

import sqlite3
import sys

import sqlite_vec


def use_a_sqlite_that_loads_extensions() -> None:
    if hasattr(sqlite3.Connection, "enable_load_extension"):
        return
    try:
        import pysqlite3  # a wheel for Linux x86_64 (pyproject): elsewhere, the stdlib's
        from pysqlite3 import dbapi2
    except ImportError:
        return
    sys.modules["sqlite3"] = pysqlite3
    sys.modules["sqlite3.dbapi2"] = dbapi2


def load_sqlite_vec(sender, connection, **kwargs) -> None:
    """Load `sqlite-vec` into a new SQLite connection (Django's `connection_created`)."""
    if connection.vendor != "sqlite":
        return
    raw = connection.connection
    raw.enable_load_extension(True)
    try:
        sqlite_vec.load(raw)
    finally:
        raw.enable_load_extension(False)
