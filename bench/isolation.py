"""Whether one user's heaviest allowed write holds up another user's runs.

Starts LangHost as `make run` does (`manage.py serve`, a fresh data dir, the QA echo plugin).
A second user, signed up like anyone, opens a conversation and writes the largest state the
limits allow (`LANGHOST_STATE_MAX_KEYS` keys, `LANGHOST_STATE_MAX_BYTES` in all) as often as
the limits allow (`LANGHOST_STATE_WRITE_BYTES_PER_USER`: a 429's `Retry-After` is waited out, as
a client would), while the admin's echo runs over HTTP are timed; slices with that load and
without it take turns, so a machine that speeds up or slows down weighs on both alike.

    .venv/bin/python bench/isolation.py [--runs 200] [--seconds 5]

(`--seconds` is unused.) The last line reads `isolation: stall_ratio=X`: the median echo run
under that load over the median without it.
"""

import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from http_overhead import RUN_BODY, KeepAlive, first_run, start_server, stop_server
from run_overhead import parse_arguments

SLICES = 8
BUDGET = 2.0
# LANGHOST_STATE_MAX_KEYS and LANGHOST_STATE_MAX_BYTES (their defaults), filled to the brim.
STATE_KEYS = 1000
STATE_VALUE = "x" * (int(os.environ.get("LANGHOST_STATE_MAX_BYTES", 1024 * 1024)) // STATE_KEYS - 16)
USER = {"email": "heavy@example.com", "password": "Heavy-User-Passw0rd-42"}


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
    return user, f"{conversations}/{conversation['id']}"


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
    server = start_server(tmp / "server", port)
    try:
        _, token = await first_run(server, port)
        user, conversation = await heavy_user_conversation(port, token)
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
    print(f"budget: stall_ratio <= {BUDGET}")
    print(f"isolation: stall_ratio={ratio:.2f}")


if __name__ == "__main__":
    args = parse_arguments(__doc__)
    with tempfile.TemporaryDirectory(prefix="langhost-isolation-bench-") as tmp:
        asyncio.run(main(args.runs, Path(tmp)))
