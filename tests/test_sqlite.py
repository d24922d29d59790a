"""On SQLite, the database connection can search vectors (sqlite-vec, loaded into every new
connection), whatever Python built the interpreter."""

import struct

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db


def vector(*values: float) -> bytes:
    return struct.pack(f"{len(values)}f", *values)


@pytest.mark.skipif(connection.vendor != "sqlite", reason="sqlite-vec is SQLite's")
def test_the_connection_finds_the_nearest_vector_with_sqlite_vec():
    with connection.cursor() as cursor:
        cursor.execute("CREATE VIRTUAL TABLE temp.probe USING vec0(embedding float[3])")
        for rowid, embedding in ((1, vector(1, 0, 0)), (2, vector(0, 1, 0)),
                                 (3, vector(0, 0, 1))):
            cursor.execute("INSERT INTO temp.probe(rowid, embedding) VALUES (%s, %s)",
                           [rowid, embedding])
        cursor.execute("SELECT rowid FROM temp.probe WHERE embedding MATCH %s AND k = 2 "
                       "ORDER BY distance", [vector(0.1, 0.9, 0.2)])
        assert [row[0] for row in cursor.fetchall()] == [2, 3]
