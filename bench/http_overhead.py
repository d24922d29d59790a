"""What the HTTP path costs on top of the bare runtime round trip.

Starts LangHost as `make run` does (`manage.py serve`, a fresh data dir, the QA echo plugin),
and in the same run measures:
  - cold start: from spawning the server to its first completed plugin run over HTTP;
  - bare:       the same runner straight over a runtime link of this process, with the context
                the orchestrator builds (`run_overhead.py`'s yardstick);
  - http:       `POST /api/v1/runs` for that runner, signed in with a JWT, over one keep-alive
                connection per client. The client is `KeepAlive` below: HTTP/1.1 on asyncio's
                streams, a request in one write, a response framed by its Content-Length. A
                client library runs on the same two cores as the server and would be measured
                with it: aiohttp's adds about 0.4 ms a run here, httpx's about 1 ms.
The two sides take turns (run for run, then in slices of the 16-way phase), so a machine that
speeds up or slows down weighs on both alike. Then the RSS of the web process alone.

Two floors say how much of each budget the stack takes before LangHost runs anything:
  - api:        a signed-in `GET /api/v1/` (daphne, the middleware, DRF, the JWT; no run),
                taking turns with bare after the RSS is read: bare's median plus its median,
                over bare's, is the least the latency ratio can be;
  - cold floor: a process that only sets Django up, migrates a fresh data dir as `serve` does
                (from the migrated template, `langhost/base/migrated_template.py`, once the
                first start made it), and hashes and checks a password (as creating the admin
                and signing in do): the least a cold start can take, the runtime aside.

    .venv/bin/python bench/http_overhead.py [--runs 200] [--seconds 5]

The last line reads
`http: latency_ratio=X throughput_ratio=Y cold_start_s=Z web_rss_mib=W`.
"""

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from run_overhead import (
    CONCURRENCY,
    ECHO_BINDING,
    ECHO_PLUGIN,
    ROOT,
    bare_round_trip,
    echo_runtime,
    measure,
    parse_arguments,
    setup_django,
)

ADMIN = {"email": "bench@example.com", "password": "Bench-Admin-Passw0rd"}
COLD_FLOOR = """
import django
from langhost.base import data_dir
data_dir.prepare()
django.setup()
from django.contrib.auth.hashers import check_password, make_password
from langhost.base import migrated_template
migrated_template.migrate()
check_password({password!r}, make_password({password!r}))
print("done", flush=True)
"""
RUN_BODY = {"runner_id": ECHO_BINDING["runner_id"], "input": {"text": "bench"}}
START_LIMIT_SECONDS = 120


class KeepAlive:
    """One keep-alive HTTP/1.1 connection to the server, for JSON requests and answers."""

    def __init__(self, port: int, token: str | None = None):
        self.port = port
        self.token = token
        self.head = f"Host: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n" + (
            f"Authorization: Bearer {token}\r\n" if token else "")
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self.last_headers: dict[str, str] = {}

    async def post(self, path: str, body: dict) -> tuple[int, dict]:
        """The status and the JSON body of the answer to `POST path` with `body`."""
        return await self.send("POST", path, body)

    async def send(self, method: str, path: str, body: dict) -> tuple[int, dict]:
        """The status and the JSON body of the answer to `method path` with `body`."""
        if self.streams is None:
            self.streams = await asyncio.open_connection("127.0.0.1", self.port)
        reader, writer = self.streams
        data = json.dumps(body).encode()
        writer.write(f"{method} {path} HTTP/1.1\r\n{self.head}Content-Length: {len(data)}\r\n\r\n"
                     .encode() + data)
        try:
            status_line, *lines = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1") \
                .split("\r\n")
            headers = dict(line.lower().split(": ", 1) for line in lines if line)
            if "content-length" not in headers:
                raise SystemExit(f"an answer without Content-Length: {status_line}")
            answer = json.loads(await reader.readexactly(int(headers["content-length"])))
            self.last_headers = headers
        except (asyncio.IncompleteReadError, ConnectionError):
            await self.close()  # the server closed the connection: the next request reopens it
            raise
        if headers.get("connection") == "close":
            await self.close()
        return int(status_line.split(" ", 2)[1]), answer

    async def close(self) -> None:
        if self.streams is not None:
            self.streams[1].close()
            self.streams = None


def start_server(data_dir: Path, port: int) -> subprocess.Popen:
    """`manage.py serve` as `make run` starts it, on `data_dir` with the echo plugin."""
    plugins = data_dir / "plugins"
    shutil.copytree(ECHO_PLUGIN, plugins / ECHO_PLUGIN.name)
    env = {key: value for key, value in os.environ.items()
           if key not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL")}
    env.update(LANGHOST_DATA_DIR=str(data_dir), LANGHOST_PLUGINS_DIR=str(plugins),
               LANGHOST_ADMIN_EMAIL=ADMIN["email"], LANGHOST_ADMIN_PASSWORD=ADMIN["password"],
               LANGHOST_LOG_LEVEL="WARNING")
    return subprocess.Popen([sys.executable, "manage.py", "serve", "--port", str(port)],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop_server(server: subprocess.Popen) -> None:
    """SIGTERM (it stops its runs and its runtime), then SIGKILL if it lingers."""
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


async def first_run(server: subprocess.Popen, port: int) -> tuple[float, str]:
    """Seconds from the spawn until a plugin run completed over HTTP, and the access token."""
    started = time.perf_counter()
    token, http = None, KeepAlive(port)
    try:
        while time.perf_counter() - started < START_LIMIT_SECONDS:
            if server.poll() is not None:
                raise SystemExit(f"manage.py serve exited with {server.returncode}")
            try:
                if token is None:
                    status, answer = await http.post("/api/v1/auth/login", ADMIN)
                    if status == 200:
                        token = answer["access_token"]
                        await http.close()
                        http = KeepAlive(port, token)
                if token is not None:
                    status, answer = await http.post("/api/v1/runs", RUN_BODY)
                    if status == 201 and answer["status"] == "completed":
                        return time.perf_counter() - started, token
            except (OSError, asyncio.IncompleteReadError):  # not listening yet
                pass
            await asyncio.sleep(0.02)
    finally:
        await http.close()
    raise SystemExit(f"no completed run within {START_LIMIT_SECONDS} s")


def cold_floor(data_dir: Path) -> float:
    """Seconds from spawning `COLD_FLOOR` on an empty `data_dir` until it says it is done (its
    exit is not waited for)."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL")}
    env.update(LANGHOST_DATA_DIR=str(data_dir), DJANGO_SETTINGS_MODULE="langhost.settings")
    started = time.perf_counter()
    with subprocess.Popen([sys.executable, "-c", COLD_FLOOR.format(password=ADMIN["password"])],
                          cwd=ROOT, env=env, stdout=subprocess.PIPE) as process:
        if process.stdout.readline().strip() != b"done":
            raise SystemExit("the cold start floor's process failed")
        return time.perf_counter() - started


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2:].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def runtimes(web_pid: int) -> list[int]:
    """The web process's runtimes: its children, or theirs when a sandbox (bubblewrap) runs
    them."""
    found = []
    for child in children(web_pid):
        sandboxed = Path(f"/proc/{child}/comm").read_text().strip() == "bwrap"
        found.extend(children(child) if sandboxed else [child])
    return found


def runtime_rss(web_pid: int) -> str:
    """The RSS of the runtime (the web process's child) and of its plugin processes."""
    parts = []
    for runtime in runtimes(web_pid):
        parts.append(f"runtime {rss_mib(runtime):.0f} MiB")
        parts.extend(f"plugin {rss_mib(plugin):.0f} MiB" for plugin in children(runtime))
    return ", ".join(parts) or "no runtime process"


async def main(runs: int, seconds: float, tmp: Path) -> None:
    from runners.runtime.process import free_port

    port = free_port()
    server = start_server(tmp / "server", port)
    try:
        cold_start, token = await first_run(server, port)
        gateway = echo_runtime(tmp / "bench")
        clients = [KeepAlive(port, token) for _ in range(CONCURRENCY)]
        free = asyncio.Queue()
        for client in clients:
            free.put_nowait(client)
        try:
            await gateway.discover()
            bare_run = await bare_round_trip(gateway)

            async def http_run():
                client = await free.get()
                try:
                    status, outcome = await client.post("/api/v1/runs", RUN_BODY)
                    if status != 201 or outcome["status"] != "completed":
                        raise SystemExit(f"run failed: {status} {outcome}")
                finally:
                    free.put_nowait(client)

            results = await measure({"bare": bare_run, "http": http_run}, runs, seconds)
            web_rss, others = rss_mib(server.pid), runtime_rss(server.pid)

            async def api_request():
                status, answer = await clients[0].send("GET", "/api/v1/", {})
                if status != 200:
                    raise SystemExit(f"GET /api/v1/ failed: {status} {answer}")

            floor = await measure({"bare": bare_run, "api": api_request}, runs, 0)
        finally:
            for client in clients:
                await client.close()
            await gateway.stop()
    finally:
        stop_server(server)
    floor_s = cold_floor(tmp / "cold-floor")

    bare, http = results["bare"], results["http"]
    for name, result in results.items():
        print(f"{name:>6}: median {result['median'] * 1000:.2f} ms, "
              f"p95 {result['p95'] * 1000:.2f} ms, {CONCURRENCY}-way {result['throughput']:.1f} runs/s")
    print(f"cold start to the first plugin run over HTTP: {cold_start:.2f} s; "
          f"web process RSS after the load: {web_rss:.0f} MiB ({others})")
    print(f"floors: a signed-in GET /api/v1/ takes {floor['api']['median'] * 1000:.2f} ms, "
          f"bare + it = {1 + floor['api']['median'] / floor['bare']['median']:.2f}x bare; "
          f"setting Django up, migrating and hashing take {floor_s:.2f} s")
    print("targets: latency_ratio <= 1.6, throughput_ratio >= 0.7, cold_start_s <= 2.0, "
          "web_rss_mib <= 150")
    print(f"http: latency_ratio={http['median'] / bare['median']:.2f} "
          f"throughput_ratio={http['throughput'] / bare['throughput']:.2f} "
          f"cold_start_s={cold_start:.2f} web_rss_mib={web_rss:.0f}")


if __name__ == "__main__":
    args = parse_arguments(__doc__)
    with tempfile.TemporaryDirectory(prefix="langhost-http-bench-") as tmp:
        (Path(tmp) / "bench").mkdir()
        setup_django(Path(tmp) / "bench")  # this process's own side, before the clock starts
        asyncio.run(main(args.runs, args.seconds, Path(tmp)))
