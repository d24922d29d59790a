"""SQLite that can load extensions (`sqlite-vec`, the vector search of knowledge bases).

Python built without loadable-extension support (pyenv's default build, say) cannot load
one into the standard library's SQLite. There, `pysqlite3` (its own SQLite, extensions
enabled) stands in for the standard module before Django's SQLite backend imports it; a
Python whose own `sqlite3` can load extensions keeps it.
"""

import importlib.util
import os
import sqlite3
import sys

# The extension the `sqlite-vec` wheel ships, found without importing the package: importing
# it imports numpy when numpy is installed (tens of MiB in every process).
SQLITE_VEC = os.path.join(importlib.util.find_spec("sqlite_vec").submodule_search_locations[0],
                          "vec0")


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
        raw.load_extension(SQLITE_VEC)
    finally:
        raw.enable_load_extension(False)
