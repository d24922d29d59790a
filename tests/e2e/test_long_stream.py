"""A long message to the shipped streaming echo costs a few times its size.

Every delta carries only its new text, and the deltas of a burst travel as one: the NDJSON
response and the database grow linearly with the reply, not with its square.
"""

import json
import sqlite3
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import ADMIN_EMAIL, ADMIN_PASSWORD
from tests.timing import scaled

pytestmark = pytest.mark.e2e

ECHO = "plugin:langhost/examples/echo"
# 3,334 words, each a delta of the echo's: a reply whose cost grew with its square would cost
# hundreds of times its size. (The echo sends the whole text so far with each word, as LangBot's
# chunks do, so its own traffic grows with the square: twice the words take four times as long.)
TEXT = ("ab " * 3334)[:10000]
# What a long reply may cost, over its own size. Measured: 2.5x for the NDJSON (the deltas,
# the completed message, 28 frames) and 3.7x for the database (the input, the deltas, the
# completed message, rows and indexes).
NDJSON_FACTOR = 3.0
DATABASE_FACTOR = 4.5


def database_bytes(data_dir: Path) -> int:
    with sqlite3.connect(data_dir / "langhost.sqlite3") as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return (data_dir / "langhost.sqlite3").stat().st_size


def signed_in(http) -> dict:
    login = http.post("/api/v1/auth/login", json={"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD})
    return {"Authorization": f"Bearer {login.json()['access_token']}"}


def wait_for_echo(http, headers) -> None:
    deadline = time.monotonic() + scaled(30)
    while http.post("/api/v1/runs", json={"runner_id": ECHO, "input": {"text": "hi"}},
                    headers=headers).status_code != 201:
        assert time.monotonic() < deadline, "the examples' echo runner never came up"
        time.sleep(0.2)


def test_a_long_streamed_reply_costs_a_few_times_its_size(daphne_server, daphne_env):
    data_dir = Path(daphne_env["LANGHOST_DATA_DIR"])
    with httpx.Client(base_url=daphne_server, timeout=scaled(300)) as http:
        headers = signed_in(http)
        wait_for_echo(http, headers)
        before = database_bytes(data_dir)
        response = http.post("/api/v1/runs?stream=1", headers=headers,
                             json={"runner_id": ECHO, "input": {"text": TEXT}})
        grown = database_bytes(data_dir) - before

    frames = [json.loads(line) for line in response.text.splitlines()]
    streamed = "".join(frame["data"]["chunk"]["content"] for frame in frames
                       if frame["type"] == "message.delta")
    final = next(frame for frame in frames if frame["type"] == "message.completed")
    reply = final["data"]["message"]["content"]
    assert frames[-1]["status"] == "completed"
    assert streamed == TEXT.strip()
    assert reply.startswith(TEXT)
    assert len(response.content) < NDJSON_FACTOR * len(reply)
    assert grown < DATABASE_FACTOR * len(reply)
    # Deltas that arrive close together are one frame: a few dozen for 3,334 words.
    assert len(frames) < 100
