"""Nearest vectors to a query vector: one interface, an engine per database.

Vectors live in *spaces* (`knowledge` for knowledge bases' chunks, `plugin` for plugins'
own collections), each cut into partitions (a knowledge base, a plugin's collection); an
item is known by its row id (a chunk's, a plugin vector's).

- **SQLite** (the embedded default): sqlite-vec's `vec0` virtual tables, one per space and
  dimension count (`<space>_vectors_<dims>`), the partition as their partition key. They hold
  unit vectors and are searched by euclidean distance, which orders as cosine does and scans
  faster (cosine distance = d² / 2). The extension loads into every connection
  (`langhost/base/sqlite.py`).
- **PostgreSQL with pgvector**: one table per space and dimension count with an HNSW index
  (cosine), searched with pgvector's iterative scan so a partition filter still returns k.
- **Any other database**: an exact search in Python over the rows the caller names.

Vectors are float32, little-endian (`pack`), as the models store them. Distances are cosine
distances (0 is the same direction); a hit is `(row id, distance)`.
"""

import math
import struct
from collections.abc import Callable, Iterable

from django.conf import settings
from django.db import connection, transaction

SPACES = frozenset({"knowledge", "plugin"})
# pgvector indexes vectors of up to this many dimensions; longer ones are searched unindexed.
HNSW_MAX_DIMENSIONS = 2000


def pack(vector: list[float]) -> bytes:
    return struct.pack(f"<{len(vector)}f", *vector)


def unpack(blob: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(blob) // 4}f", blob))


def _table(space: str, dimensions: int) -> str:
    if space not in SPACES:
        raise ValueError(f"unknown vector space {space!r}")
    return f"{space}_vectors_{int(dimensions)}"


_engines: dict[tuple, str] = {}


def engine() -> str:
    """`sqlite-vec`, `pgvector` or `exact`, for the default database."""
    if connection.vendor == "sqlite":
        return "sqlite-vec"
    settings = connection.settings_dict
    key = (connection.vendor, settings["NAME"], settings["HOST"], settings["PORT"])
    if key not in _engines:
        found = False
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
                found = cursor.fetchone() is not None
        _engines[key] = "pgvector" if found else "exact"
    return _engines[key]


def _pg_literal(vector: Iterable[float]) -> str:
    return "[" + ",".join(repr(float(value)) for value in vector) + "]"


_ensured: set[tuple] = set()


def _ensure_table(space: str, dimensions: int) -> str:
    """The space's table for vectors of `dimensions`, made once per process and database:
    on PostgreSQL even `CREATE INDEX IF NOT EXISTS` takes a lock that would queue searches
    behind ingestion."""
    table, kind = _table(space, dimensions), engine()
    settings = connection.settings_dict
    key = (connection.vendor, settings["NAME"], settings["HOST"], settings["PORT"], table)
    if key in _ensured:
        return table
    with connection.cursor() as cursor:
        if kind == "sqlite-vec":
            cursor.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING vec0("
                           f"partition text partition key, "
                           f"embedding float[{int(dimensions)}])")
        elif kind == "pgvector":
            cursor.execute(f"CREATE TABLE IF NOT EXISTS {table} (id bigint PRIMARY KEY, "
                           f"partition text NOT NULL, embedding vector({int(dimensions)}) "
                           f"NOT NULL)")
            cursor.execute(f"CREATE INDEX IF NOT EXISTS {table}_partition ON {table} "
                           f"(partition)")
            if dimensions <= HNSW_MAX_DIMENSIONS:
                cursor.execute(f"CREATE INDEX IF NOT EXISTS {table}_hnsw ON {table} "
                               f"USING hnsw (embedding vector_cosine_ops)")
    # Known made once made for good: a transaction that rolls back takes the table with it.
    transaction.on_commit(lambda: _ensured.add(key))
    return table


def _mapped() -> None:
    """This SQLite connection reads the file through a memory map: a search scans every vector
    of its partition, a copy through SQLite's page cache each time otherwise. Only the
    connections that search map it (mapped pages count in a process's resident memory)."""
    connection.ensure_connection()
    raw = connection.connection
    if getattr(connection, "langhost_mapped", None) is raw:
        return
    with connection.cursor() as cursor:
        cursor.execute(f"PRAGMA mmap_size={int(settings.LANGHOST_SQLITE_MMAP_BYTES)}")
    connection.langhost_mapped = raw  # the pragma holds for this connection only


def add(space: str, partition: str, dimensions: int, items: list[tuple[int, bytes]]) -> None:
    """Index `items` (`(row id, packed vector)`, saved) in the partition."""
    kind = engine()
    if kind == "exact" or not items:
        return
    table = _ensure_table(space, dimensions)
    with connection.cursor() as cursor:
        if kind == "sqlite-vec":
            cursor.executemany(
                f"INSERT INTO {table}(rowid, partition, embedding) VALUES (%s, %s, %s)",
                [(pk, partition, pack(unit(unpack(bytes(blob))))) for pk, blob in items])
        else:
            cursor.executemany(
                f"INSERT INTO {table}(id, partition, embedding) VALUES (%s, %s, %s::vector) "
                f"ON CONFLICT (id) DO UPDATE SET partition = EXCLUDED.partition, "
                f"embedding = EXCLUDED.embedding",
                [(pk, partition, _pg_literal(unpack(bytes(blob)))) for pk, blob in items])


def remove(space: str, dimensions: int | None, ids: list[int]) -> None:
    """Forget the vectors of these rows (before or after the rows go)."""
    kind = engine()
    if kind == "exact" or not dimensions or not ids:
        return
    table = _ensure_table(space, dimensions)
    key = "rowid" if kind == "sqlite-vec" else "id"
    with connection.cursor() as cursor:
        for start in range(0, len(ids), 500):
            batch = ids[start:start + 500]
            cursor.execute(f"DELETE FROM {table} WHERE {key} IN ({', '.join(['%s'] * len(batch))})",
                           batch)


def nearest(space: str, partition: str, dimensions: int, query: list[float], k: int,
            rows: Callable[[], Iterable[tuple[int, bytes]]]) -> list[tuple[int, float]]:
    """The `k` items of the partition nearest to `query`, nearest first. `rows` yields the
    partition's `(row id, packed vector)` for the exact search, where no index serves."""
    kind = engine()
    if kind == "sqlite-vec":
        table = _ensure_table(space, dimensions)
        _mapped()
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT rowid, distance FROM {table} WHERE embedding MATCH %s "
                           f"AND k = %s AND partition = %s ORDER BY distance",
                           [pack(unit(query)), int(k), partition])
            # Between unit vectors, cosine distance = squared euclidean distance / 2.
            return [(row[0], row[1] * row[1] / 2) for row in cursor.fetchall()]
    if kind == "pgvector":
        table = _ensure_table(space, dimensions)
        with transaction.atomic(), connection.cursor() as cursor:
            # Iterative scan: the index walk goes on until k rows of the partition are found.
            cursor.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
                           "set_config('hnsw.ef_search', %s, true)", [str(max(40, 2 * k))])
            cursor.execute(f"SELECT id, embedding <=> %s::vector AS distance FROM {table} "
                           f"WHERE partition = %s ORDER BY embedding <=> %s::vector LIMIT %s",
                           [_pg_literal(query), partition, _pg_literal(query), int(k)])
            found = [(row[0], float(row[1])) for row in cursor.fetchall()]
        return sorted(found, key=lambda hit: hit[1])  # relaxed order: nearly sorted
    scored = [(pk, cosine_distance(query, unpack(bytes(blob)))) for pk, blob in rows()]
    return sorted(scored, key=lambda hit: hit[1])[:k]


def unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else list(vector)


def cosine_distance(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norms = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return 1.0 - dot / norms if norms else 1.0
