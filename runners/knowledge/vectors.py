"""Nearest chunks of a knowledge base to a query vector: one interface, an engine per database.

- **SQLite** (the embedded default): sqlite-vec's `vec0` virtual tables, one per dimension
  count (`knowledge_vectors_<dims>`), the knowledge base as their partition key, a chunk's
  id as its rowid, cosine distance. Loaded into every connection (`langhost/sqlite.py`).
- **Any other database**: an exact search over the base's vectors, in Python.

Vectors are float32, little-endian (`pack`), as `Chunk.vector` stores them. Distances are
cosine distances (0 is the same direction); a hit is `(chunk id, distance)`.
"""

import math
import struct

from django.db import connection

from runners.knowledge.models import Chunk


def pack(vector: list[float]) -> bytes:
    return struct.pack(f"<{len(vector)}f", *vector)


def unpack(blob: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(blob) // 4}f", blob))


def _table(dimensions: int) -> str:
    return f"knowledge_vectors_{int(dimensions)}"


def _indexed() -> bool:
    return connection.vendor == "sqlite"


def _ensure_table(dimensions: int) -> str:
    table = _table(dimensions)
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING vec0("
                       f"knowledge_base_id text partition key, "
                       f"embedding float[{int(dimensions)}] distance_metric=cosine)")
    return table


def add(knowledge_base_id: str, dimensions: int, chunks: list[Chunk]) -> None:
    """Index `chunks` (saved, with their vectors) of the base."""
    if not _indexed() or not chunks:
        return
    table = _ensure_table(dimensions)
    with connection.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {table}(rowid, knowledge_base_id, embedding) VALUES (%s, %s, %s)",
            [(chunk.pk, str(knowledge_base_id), bytes(chunk.vector)) for chunk in chunks])


def remove(dimensions: int | None, chunk_ids: list[int]) -> None:
    """Forget the vectors of these chunks (before or after the rows go)."""
    if not _indexed() or not dimensions or not chunk_ids:
        return
    table = _ensure_table(dimensions)
    with connection.cursor() as cursor:
        for start in range(0, len(chunk_ids), 500):
            batch = chunk_ids[start:start + 500]
            cursor.execute(f"DELETE FROM {table} WHERE rowid IN ({', '.join(['%s'] * len(batch))})",
                           batch)


def nearest(knowledge_base_id: str, dimensions: int, query: list[float],
            k: int) -> list[tuple[int, float]]:
    """The `k` chunks of the base nearest to `query`, nearest first."""
    if _indexed():
        table = _ensure_table(dimensions)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT rowid, distance FROM {table} WHERE embedding MATCH %s "
                           f"AND k = %s AND knowledge_base_id = %s ORDER BY distance",
                           [pack(query), int(k), str(knowledge_base_id)])
            return [(row[0], row[1]) for row in cursor.fetchall()]
    scored = [(pk, cosine_distance(query, unpack(bytes(blob))))
              for pk, blob in Chunk.objects.filter(knowledge_base_id=knowledge_base_id)
              .values_list("pk", "vector").iterator(chunk_size=2000)]
    return sorted(scored, key=lambda hit: hit[1])[:k]


def cosine_distance(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norms = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return 1.0 - dot / norms if norms else 1.0
