"""Streaming at scale: many runs streaming at the same time over HTTP NDJSON from one server.

Starts LangHost as `make run` does (`manage.py serve` on the embedded default, a fresh data dir,
the QA echo plugin) and, in a process of its own, the scripted OpenAI-compatible server
(`tests/fake_providers.py`, asyncio: it is not the bottleneck), whose every answer streams
TOKENS text pieces PACE seconds apart, each the time it was sent. Then:
  - `--runs` built-in LLM agent runs (`POST /api/v1/runs?stream=1`, the agent of a type on that
    model), started evenly over RAMP seconds and streaming together;
  - `--plugin-runs` runs of the QA plugin's `slow` runner streaming stamped deltas at the same
    pace (`stamped:TOKENS:PACE`).
For each: how many completed, the added inter-token delay (the time the client saw a token
minus the time it was sent) at p50 and p99, and the web process's RSS per run in flight (its
peak meanwhile, less its RSS before, over the runs).

    .venv/bin/python bench/concurrency.py [--runs 1000] [--plugin-runs 200]

The last line reads `concurrency: runs=N completed=N added_p99_ms=X rss_kib_per_run=Y`, the line
before it the same for the plugin runner's runs (`plugin-runners:`).
"""

import argparse
import asyncio
import json
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from http_overhead import KeepAlive, first_run, rss_mib, start_server, stop_server
from run_overhead import ROOT

TOKENS = 100
PACE = 0.2
RAMP_SECONDS = 10.0
BUDGET = {"added_p99_ms": 100, "rss_kib_per_run": 300}
STAMP = re.compile(r"@(\d+\.\d+)")
SLOW_RUNNER = "plugin:e2e/agent-runner-qa/slow"
FAKE_PROVIDER = """
import sys, time
sys.path.insert(0, {root!r})
from tests.fake_providers import FakeProvider, Reply
provider = FakeProvider("openai")
paced = Reply(stamped={tokens}, pace={pace})
warm = Reply(text="warm")
provider.default = Reply(answer=lambda body: warm if "warm" in str(body["messages"][-1])
                         else paced)
print(provider.start().base_url, flush=True)
time.sleep(3600)
"""


class Streams:
    """The runs of one kind: their tokens' added delays, and how each ended."""

    def __init__(self):
        self.delays: list[float] = []
        self.statuses: list[str] = []

    async def run(self, port: int, token: str, body: dict) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        data = json.dumps(body).encode()
        writer.write(f"POST /api/v1/runs?stream=1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                     f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
                     f"Connection: close\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data)
        status = "no answer"
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            if " 201 " not in head.split("\r\n", 1)[0]:
                status = head.split("\r\n", 1)[0]
                return
            pending = b""
            async for piece in _body(reader, "transfer-encoding: chunked" in head.lower()):
                seen = time.time()
                pending += piece
                *lines, pending = pending.split(b"\n")
                for line in filter(None, lines):
                    frame = json.loads(line)
                    if frame.get("type") == "message.delta":
                        content = frame["data"]["chunk"].get("content") or ""
                        self.delays += [seen - float(sent) for sent in STAMP.findall(content)]
                    elif frame.get("type") in ("run.finished", "run.refused"):
                        status = frame.get("status") or frame["type"]
                        if status != "completed":  # why, shortened: the reasons are counted
                            reason = frame.get("status_reason") or frame.get("detail") or ""
                            status += f" ({reason[:80]})"
        except (OSError, asyncio.IncompleteReadError) as exc:
            status = f"{type(exc).__name__}"
        finally:
            self.statuses.append(status)
            writer.close()

    def line(self, name: str, runs: int, rss_kib_per_run: float) -> str:
        ordered = sorted(self.delays) or [float("nan")]
        p50 = statistics.median(ordered) * 1000
        p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1000
        return (f"{name}: runs={runs} completed={self.statuses.count('completed')} "
                f"added_p50_ms={p50:.0f} added_p99_ms={p99:.0f} "
                f"rss_kib_per_run={rss_kib_per_run:.0f}")

    def outcomes(self) -> str:
        return ", ".join(f"{count} {status}"
                         for status, count in sorted(Counter(self.statuses).items()))


async def _body(reader: asyncio.StreamReader, chunked: bool):
    """The response body as it arrives (chunked, or until the server closes)."""
    if not chunked:
        while piece := await reader.read(65536):
            yield piece
        return
    while size := int((await reader.readline()).split(b";")[0], 16):
        yield await reader.readexactly(size)
        await reader.readexactly(2)


async def at_once(server_pid: int, runs: int, start) -> float:
    """Start `runs` runs evenly over RAMP_SECONDS and wait for them all; the web process's RSS
    per run in flight, in KiB."""
    before = rss_mib(server_pid)
    peak = before
    tasks = []
    for _ in range(runs):
        tasks.append(asyncio.ensure_future(start()))
        await asyncio.sleep(RAMP_SECONDS / runs)
    while not all(task.done() for task in tasks):
        peak = max(peak, rss_mib(server_pid))
        await asyncio.sleep(0.25)
    await asyncio.gather(*tasks)
    return (peak - before) * 1024 / runs


async def llm_agent(admin: KeepAlive, base_url: str) -> str:
    """An agent of a built-in LLM agent type on the scripted model; its id."""
    steps = [("/api/v1/model-providers", {"name": "paced", "kind": "openai",
                                          "base_url": base_url, "api_key": "sk-bench"}),
             ("/api/v1/models", {"name": "paced", "upstream_model": "paced"}),
             ("/api/v1/agent-types", {"name": "Streamer", "slug": "streamer",
                                      "runner_id": "builtin:llm-agent",
                                      "primary_model": "paced"}),
             ("/api/v1/projects", {"name": "Streams", "slug": "streams"})]
    made = []
    for path, body in steps:
        if path == "/api/v1/models":
            body["provider_id"] = made[0]["id"]
        status, answer = await admin.post(path, body)
        assert status == 201, (path, answer)
        made.append(answer)
    status, agent = await admin.post(f"/api/v1/projects/{made[3]['id']}/agents",
                                     {"agent_type_id": made[2]["id"], "name": "streamer"})
    assert status == 201, agent
    return agent["id"]


async def main(runs: int, plugin_runs: int, tmp: Path) -> None:
    from runners.runtime.process import free_port

    port = free_port()
    server = start_server(tmp / "server", port)
    provider = subprocess.Popen(
        [sys.executable, "-c", FAKE_PROVIDER.format(root=str(ROOT), tokens=TOKENS, pace=PACE)],
        stdout=subprocess.PIPE, text=True)
    try:
        _, token = await first_run(server, port)
        admin = KeepAlive(port, token)
        agent_id = await llm_agent(admin, provider.stdout.readline().strip())
        status, warmed = await admin.post("/api/v1/runs", {"agent_id": agent_id,
                                                           "input": {"text": "warm"}})
        assert status == 201 and warmed["status"] == "completed", warmed
        await admin.close()

        agents, plugins = Streams(), Streams()
        agent_rss = await at_once(server.pid, runs, lambda: agents.run(
            port, token, {"agent_id": agent_id, "input": {"text": "stream"}}))
        plugin_rss = await at_once(server.pid, plugin_runs, lambda: plugins.run(
            port, token, {"runner_id": SLOW_RUNNER,
                          "input": {"text": f"stamped:{TOKENS}:{PACE}"}}))
    finally:
        provider.kill()
        provider.wait()
        stop_server(server)

    print(f"{runs} LLM agent runs: {agents.outcomes()}; {len(agents.delays)} tokens")
    print(f"{plugin_runs} plugin runner runs: {plugins.outcomes()}; {len(plugins.delays)} tokens")
    print(f"budget: completed all, added_p99_ms <= {BUDGET['added_p99_ms']}, "
          f"rss_kib_per_run <= {BUDGET['rss_kib_per_run']}")
    print(plugins.line("plugin-runners", plugin_runs, plugin_rss))
    print(agents.line("concurrency", runs, agent_rss))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--plugin-runs", type=int, default=200)
    args = parser.parse_args()
    # A socket a run to the client, one to the model: past the usual 1,024 descriptors.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with tempfile.TemporaryDirectory(prefix="langhost-concurrency-bench-") as tmp:
        asyncio.run(main(args.runs, args.plugin_runs, Path(tmp)))
