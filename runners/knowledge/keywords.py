"""Keyword search beside the vectors, for hybrid retrieval: SQLite's FTS5 or PostgreSQL's
full-text search, over the same spaces and partitions as `vectors.py`.

- **SQLite**: an FTS5 table per space (`<space>_keywords`: the text, its partition), the
  item's row id as its rowid, ranked by BM25.
- **PostgreSQL**: the item rows themselves, through a GIN index on their text's `simple`
  tsvector (the knowledge migrations create it), each matching word weighing its rarity in
  the partition.
- **Any other database**: no keyword hits (retrieval is then vector-only).

A query matches items holding any of its distinctive words; the more and rarer the words an
item holds, the higher it ranks. A word held by more than COMMON_DOCUMENTS items is left to
the vector search: it says little about an item, and ranking every item that holds it would
make the search grow with the base. A hit is `(row id, rank)`, best first.
"""

import math
import re

from django.db import connection

# The rows the PostgreSQL search reads: table, text column, partition columns.
PG_SOURCES = {
    "knowledge": ("knowledge_chunk", "text", ("knowledge_base_id",)),
    "plugin": ("knowledge_pluginvector", "document", ("owner", "collection")),
}
MAX_QUERY_WORDS = 64
COMMON_DOCUMENTS = 1000


def words(text: str) -> list[str]:
    return list(dict.fromkeys(re.findall(r"\w+", text.lower())))[:MAX_QUERY_WORDS]


def _fts_table(space: str) -> str:
    if space not in PG_SOURCES:
        raise ValueError(f"unknown keyword space {space!r}")
    table = f"{space}_keywords"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING fts5("
                       f"text, partition UNINDEXED)")
    return table


def add(space: str, partition: str, items: list[tuple[int, str]]) -> None:
    """Index `items` (`(row id, text)`) of the partition (SQLite; PostgreSQL indexes rows)."""
    if connection.vendor != "sqlite" or not items:
        return
    table = _fts_table(space)
    with connection.cursor() as cursor:
        cursor.executemany(f"INSERT INTO {table}(rowid, text, partition) VALUES (%s, %s, %s)",
                           [(pk, text, partition) for pk, text in items])


def remove(space: str, ids: list[int]) -> None:
    if connection.vendor != "sqlite" or not ids:
        return
    table = _fts_table(space)
    with connection.cursor() as cursor:
        for start in range(0, len(ids), 500):
            batch = ids[start:start + 500]
            cursor.execute(f"DELETE FROM {table} WHERE rowid IN ({', '.join(['%s'] * len(batch))})",
                           batch)


def matching(space: str, partition: tuple[str, ...], query: str, k: int) -> list[tuple[int, float]]:
    """The `k` items of the partition that best match `query`'s words, best first.
    `partition`: the partition's key values (one for a knowledge base, two for a plugin's
    collection: owner and collection)."""
    found = words(query)
    if not found:
        return []
    if connection.vendor == "sqlite":
        table = _fts_table(space)
        partition_key = "\x1f".join(partition)
        with connection.cursor() as cursor:
            # A word's count of items in this partition, up to the bound: a few index reads.
            common = set()
            for word in found:
                cursor.execute(f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {table} "
                               f"MATCH %s AND partition = %s LIMIT %s)",
                               ['"' + word.replace('"', '""') + '"', partition_key,
                                COMMON_DOCUMENTS + 1])
                if cursor.fetchone()[0] > COMMON_DOCUMENTS:
                    common.add(word)
        found = [word for word in found if word not in common]
        if not found:
            return []
        expression = " OR ".join('"' + word.replace('"', '""') + '"' for word in found)
        with connection.cursor() as cursor:
            # bm25() is lower for better matches.
            cursor.execute(f"SELECT rowid, bm25({table}) FROM {table} WHERE {table} MATCH %s "
                           f"AND partition = %s ORDER BY bm25({table}) LIMIT %s",
                           [expression, partition_key, int(k)])
            return [(row[0], -float(row[1])) for row in cursor.fetchall()]
    if connection.vendor == "postgresql":
        return _pg_matching(space, partition, found, k)
    return []


def _pg_matching(space: str, partition: tuple[str, ...], found: list[str],
                 k: int) -> list[tuple[int, float]]:
    # PostgreSQL's own ranks know no word's rarity ("the" counts as much as "anchoring"):
    # each word weighs log(1 + COMMON_DOCUMENTS / its count of items), its rarity below the
    # common bound, as BM25's inverse document frequency does.
    table, column, keys = PG_SOURCES[space]
    where = " AND ".join(f"{key} = %s" for key in keys)
    vector = f"to_tsvector('simple', {column})"
    has = f"{vector} @@ plainto_tsquery('simple', %s)"
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join(
            f"(SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {where} AND {has} "
            f"LIMIT {COMMON_DOCUMENTS + 1}) AS found)" for _ in found),
            [value for word in found for value in (*partition, word)])
        weights = {word: math.log(1 + COMMON_DOCUMENTS / count)
                   for word, count in zip(found, cursor.fetchone(), strict=True)
                   if 0 < count <= COMMON_DOCUMENTS}
        if not weights:
            return []
        score = " + ".join(f"(CASE WHEN {has} THEN %s ELSE 0 END)" for _ in weights)
        cursor.execute(
            f"SELECT id, {score} AS score FROM {table} WHERE {where} AND "
            f"{vector} @@ websearch_to_tsquery('simple', %s) ORDER BY score DESC, id LIMIT %s",
            [*(value for item in weights.items() for value in item), *partition,
             " or ".join(weights), int(k)])
        return [(row[0], float(row[1])) for row in cursor.fetchall()]


def fused(*rankings: list[tuple[int, float]], k: int, constant: int = 60) -> list[tuple[int, float]]:
    """Reciprocal rank fusion: each item scores the sum of 1 / (constant + rank) over the
    rankings it is in; the `k` best, best first."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, (pk, _) in enumerate(ranking, start=1):
            scores[pk] = scores.get(pk, 0.0) + 1.0 / (constant + rank)
    return sorted(scores.items(), key=lambda item: -item[1])[:k]
