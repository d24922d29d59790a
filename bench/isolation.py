"""Whether one user's heaviest allowed write holds up another user's runs.

Starts LangHost as `make run` does (`manage.py serve`, a fresh data dir, the QA echo plugin).
A second user, signed up like anyone, opens a conversation and writes the largest state the
limits allow (`LANGHOST_STATE_MAX_KEYS` keys, `LANGHOST_STATE_MAX_BYTES` in all) as often as
the limits allow (`LANGHOST_STATE_WRITE_BYTES_PER_USER`: a 429's `Retry-After` is waited out, as
a client would), while the admin's echo runs over HTTP are timed; slices with that load and
without it take turns, so a machine that speeds up or slows down weighs on both alike.

Then the same user uploads a 28 MiB document to a knowledge base of their project (embedded
by the scripted OpenAI-compatible server, `tests/fake_providers.py`, in a process of its own),
and while it ingests the admin uploads a one-page document to their own project's base and
their echo runs are timed again.

    .venv/bin/python bench/isolation.py [--runs 200] [--seconds 5]

(`--seconds` is unused.) The last line reads `isolation: stall_ratio=X ingest_stall_ratio=Y
small_document_ready_s=Z`: the median echo run under the state writes, then during the large
document's ingestion, over the median without load; and how long the other project's
one-page document took to be ready.
"""

import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from http_overhead import RUN_BODY, KeepAlive, first_run, start_server, stop_server
from run_overhead import ROOT, parse_arguments

SLICES = 8
BUDGET = 2.0
# LANGHOST_STATE_MAX_KEYS and LANGHOST_STATE_MAX_BYTES (their defaults), filled to the brim.
STATE_KEYS = 1000
STATE_VALUE = "x" * (int(os.environ.get("LANGHOST_STATE_MAX_BYTES", 1024 * 1024)) // STATE_KEYS - 16)
USER = {"email": "heavy@example.com", "password": "Heavy-User-Passw0rd-42"}
LARGE_DOCUMENT_BYTES = 28 * 2**20
SMALL_DOCUMENT = b"The harbour office opens at seven in the morning and closes at six."
INGEST_BUDGET = 2.0
SMALL_READY_BUDGET = 30.0
# The scripted provider, in a process of its own: its embeddings take CPU the timed client
# must not share.
FAKE_PROVIDER = """
import sys, time
sys.path.insert(0, {root!r})
from tests.fake_providers import FakeProvider
print(FakeProvider("openai").start().base_url, flush=True)
time.sleep(3600)
"""


async def heavy_user_conversation(port: int, admin_token: str) -> tuple[KeepAlive, str]:
    """A second user's connection and the path of their conversation with an echo agent."""
    admin = KeepAlive(port, admin_token)
    anyone = KeepAlive(port)
    try:
        status, kind = await admin.post("/api/v1/agent-types", {
            "name": "Echo", "slug": "echo", "runner_id": "builtin:echo"})
        assert status == 201, kind
        status, _ = await anyone.post("/api/v1/auth/register", USER)
        assert status == 202, _
        status, tokens = await anyone.post("/api/v1/auth/login", USER)
        assert status == 200, tokens
    finally:
        await admin.close()
        await anyone.close()
    user = KeepAlive(port, tokens["access_token"])
    status, project = await user.post("/api/v1/projects", {"name": "Heavy", "slug": "heavy"})
    assert status == 201, project
    agents = f"/api/v1/projects/{project['id']}/agents"
    status, agent = await user.post(agents, {"agent_type_id": kind["id"], "name": "Echo"})
    assert status == 201, agent
    conversations = f"{agents}/{agent['id']}/conversations"
    status, conversation = await user.post(conversations, {})
    assert status == 201, conversation
    return user, project["id"], f"{conversations}/{conversation['id']}"


async def upload(port: int, token: str, path: str, name: str, data: bytes) -> tuple[int, list]:
    """`POST path` of one file as multipart, on a connection of its own."""
    boundary = uuid.uuid4().hex
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"{name}\"\r\nContent-Type: text/plain\r\n\r\n").encode() + data + \
        f"\r\n--{boundary}--\r\n".encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                     f"Authorization: Bearer {token}\r\nConnection: close\r\n"
                     f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
                     f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        await writer.drain()
        status_line, *lines = (await reader.readuntil(b"\r\n\r\n")).decode().split("\r\n")
        headers = dict(line.lower().split(": ", 1) for line in lines if line)
        answer = json.loads(await reader.readexactly(int(headers["content-length"])))
        return int(status_line.split(" ", 2)[1]), answer
    finally:
        writer.close()


def large_document() -> bytes:
    rng = random.Random(7)
    words = [f"w{n}" for n in range(50_000)]
    text = bytearray()
    while len(text) < LARGE_DOCUMENT_BYTES:
        text += (" ".join(rng.choices(words, k=10_000)) + "\n").encode()
    return bytes(text[:LARGE_DOCUMENT_BYTES])


async def knowledge_base(http: KeepAlive, project_id: str, model_id: str) -> str:
    path = f"/api/v1/projects/{project_id}/knowledge-bases"
    status, base = await http.post(path, {"name": "Archive", "embedding_model_id": model_id})
    assert status == 201, base
    return f"{path}/{base['id']}/documents"


async def document_status(http: KeepAlive, documents: str, document_id: str) -> str:
    status, document = await http.send("GET", f"{documents}/{document_id}", {})
    assert status == 200, document
    if document["status"] == "failed":
        raise SystemExit(f"{document['name']} failed: {document['status_reason']}")
    return document["status"]


async def during_ingestion(port: int, admin_token: str, user: KeepAlive, user_token: str,
                           user_project: str, admin: KeepAlive, runs: int, base_url: str,
                           ) -> tuple[list[float], float]:
    """The admin's echo runs while the user's large document ingests, and the seconds the
    admin's one-page document took to be ready meanwhile."""
    status, provider = await admin.post("/api/v1/model-providers", {
        "name": "fake", "kind": "openai", "base_url": base_url, "api_key": "sk-bench"})
    assert status == 201, provider
    status, model = await admin.post("/api/v1/models", {
        "name": "embedder", "provider_id": provider["id"], "upstream_model": "embedder",
        "model_type": "embedding"})
    assert status == 201, model
    status, own = await admin.post("/api/v1/projects", {"name": "Office", "slug": "office"})
    assert status == 201, own
    large_documents = await knowledge_base(user, user_project, model["id"])
    small_documents = await knowledge_base(admin, own["id"], model["id"])
    status, answer = await upload(port, user_token, large_documents, "archive.txt",
                                  large_document())
    assert status == 202, answer
    (large,) = answer
    while await document_status(user, large_documents, large["id"]) != "embedding":
        await asyncio.sleep(0.1)
    uploaded = time.perf_counter()
    status, answer = await upload(port, admin_token, small_documents, "office.txt",
                                  SMALL_DOCUMENT)
    assert status == 202, answer
    (small,) = answer
    timings, ready_after = [], None
    while len(timings) < runs or ready_after is None:
        timings += await echo_runs(admin, 5)
        if ready_after is None and await document_status(
                admin, small_documents, small["id"]) == "ready":
            ready_after = time.perf_counter() - uploaded
    if await document_status(user, large_documents, large["id"]) == "ready":
        raise SystemExit("the large document was ingested before the runs were timed: "
                         "make it larger")
    return timings, ready_after


async def echo_runs(admin: KeepAlive, count: int) -> list[float]:
    timings = []
    for _ in range(count):
        started = time.perf_counter()
        status, outcome = await admin.post("/api/v1/runs", RUN_BODY)
        timings.append(time.perf_counter() - started)
        if status != 201 or outcome["status"] != "completed":
            raise SystemExit(f"run failed: {status} {outcome}")
    return timings


async def main(runs: int, tmp: Path) -> None:
    from runners.runtime.process import free_port

    port = free_port()
    # A file may be 25 MiB by default: the large document's server takes one of 28.
    os.environ.setdefault("LANGHOST_ARTIFACT_MAX_BYTES", str(32 * 2**20))
    server = start_server(tmp / "server", port)
    try:
        _, token = await first_run(server, port)
        user, user_project, conversation = await heavy_user_conversation(port, token)
        admin = KeepAlive(port, token)
        state = {f"key{n}": STATE_VALUE for n in range(STATE_KEYS)}
        writes = []

        async def write_forever():
            while True:
                started = time.perf_counter()
                status, answer = await user.send("PATCH", conversation, {"state": state})
                if status == 429:
                    await asyncio.sleep(float(user.last_headers.get("retry-after", 1)))
                    continue
                if status != 200:
                    raise SystemExit(f"the largest allowed state was refused: {answer}")
                writes.append(time.perf_counter() - started)

        idle, loaded = [], []
        per_slice = max(runs // SLICES, 5)
        try:
            await echo_runs(admin, per_slice)  # warm
            for _ in range(SLICES):
                idle += await echo_runs(admin, per_slice)
                writer = asyncio.ensure_future(write_forever())
                await asyncio.sleep(0.2)  # the first write is under way
                try:
                    loaded += await echo_runs(admin, per_slice)
                finally:
                    writer.cancel()
                    await asyncio.gather(writer, return_exceptions=True)
                    await user.close()  # a cancelled request leaves its answer unread
            provider = subprocess.Popen([sys.executable, "-c", FAKE_PROVIDER.format(root=str(ROOT))],
                                        stdout=subprocess.PIPE, text=True)
            try:
                ingesting, small_ready = await during_ingestion(
                    port, token, user, user.token, user_project, admin, len(idle) // 2,
                    provider.stdout.readline().strip())
            finally:
                provider.kill()
                provider.wait()
        finally:
            await admin.close()
            await user.close()
    finally:
        stop_server(server)

    ratio = statistics.median(loaded) / statistics.median(idle)
    print(f"  idle: echo run median {statistics.median(idle) * 1000:.2f} ms ({len(idle)} runs)")
    print(f"loaded: echo run median {statistics.median(loaded) * 1000:.2f} ms ({len(loaded)} "
          f"runs), while {len(writes)} state writes of {STATE_KEYS} keys "
          f"({len(STATE_VALUE) * STATE_KEYS / 2**20:.1f} MiB) took a median "
          f"{statistics.median(writes) * 1000:.0f} ms each")
    ingest_ratio = statistics.median(ingesting) / statistics.median(idle)
    print(f"ingesting: echo run median {statistics.median(ingesting) * 1000:.2f} ms "
          f"({len(ingesting)} runs) while another user's {LARGE_DOCUMENT_BYTES >> 20} MiB "
          f"document ingested; the admin's one-page document was ready after "
          f"{small_ready:.1f} s")
    print(f"budget: stall_ratio <= {BUDGET}, ingest_stall_ratio <= {INGEST_BUDGET}, "
          f"small_document_ready_s <= {SMALL_READY_BUDGET:.0f}")
    print(f"isolation: stall_ratio={ratio:.2f} ingest_stall_ratio={ingest_ratio:.2f} "
          f"small_document_ready_s={small_ready:.1f}")


if __name__ == "__main__":
    args = parse_arguments(__doc__)
    with tempfile.TemporaryDirectory(prefix="langhost-isolation-bench-") as tmp:
        asyncio.run(main(args.runs, Path(tmp)))
