"""What the HTTP path costs on top of the bare runtime round trip.

Starts LangHost as `make run` does (`manage.py serve`, a fresh data dir, the QA echo plugin),
and in the same run measures:
  - cold start: from spawning the server to its first completed plugin run over HTTP;
  - bare:       the same runner straight over a runtime link of this process, with the context
                the orchestrator builds (`run_overhead.py`'s yardstick);
  - http:       `POST /api/v1/runs` for that runner, signed in with a JWT, over one keep-alive
                connection per client. The client is aiohttp's: it spends about 0.35 ms of CPU
                on a request here, httpx about 1 ms, which would be a fifth of what is measured.
The two sides take turns (run for run, then in slices of the 16-way phase), so a machine that
speeds up or slows down weighs on both alike. Then the RSS of the web process alone.

    .venv/bin/python bench/http_overhead.py [--runs 200] [--seconds 5]

The last line reads
`http: latency_ratio=X throughput_ratio=Y cold_start_s=Z web_rss_mib=W`.
"""

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
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
RUN_BODY = {"runner_id": ECHO_BINDING["runner_id"], "input": {"text": "bench"}}
START_LIMIT_SECONDS = 120


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


async def first_run(server: subprocess.Popen, base_url: str) -> tuple[float, str]:
    """Seconds from the spawn until a plugin run completed over HTTP, and the access token."""
    started = time.perf_counter()
    async with aiohttp.ClientSession(base_url, timeout=aiohttp.ClientTimeout(30)) as http:
        token = None
        while time.perf_counter() - started < START_LIMIT_SECONDS:
            if server.poll() is not None:
                raise SystemExit(f"manage.py serve exited with {server.returncode}")
            try:
                if token is None:
                    async with http.post("/api/v1/auth/login", json=ADMIN) as login:
                        if login.status == 200:
                            token = (await login.json())["access_token"]
                if token is not None:
                    async with http.post("/api/v1/runs", json=RUN_BODY,
                                         headers={"Authorization": f"Bearer {token}"}) as run:
                        if run.status == 201 and (await run.json())["status"] == "completed":
                            return time.perf_counter() - started, token
            except aiohttp.ClientConnectionError:
                pass
            await asyncio.sleep(0.02)
    raise SystemExit(f"no completed run within {START_LIMIT_SECONDS} s")


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


def runtime_rss(web_pid: int) -> str:
    """The RSS of the runtime (the web process's child) and of its plugin processes."""
    parts = []
    for runtime in children(web_pid):
        parts.append(f"runtime {rss_mib(runtime):.0f} MiB")
        parts.extend(f"plugin {rss_mib(plugin):.0f} MiB" for plugin in children(runtime))
    return ", ".join(parts) or "no runtime process"


async def main(runs: int, seconds: float, tmp: Path) -> None:
    from runners.plugins.runtime.process import free_port

    port = free_port()
    server = start_server(tmp / "server", port)
    try:
        cold_start, token = await first_run(server, f"http://127.0.0.1:{port}")
        gateway = echo_runtime(tmp / "bench")
        clients = [aiohttp.ClientSession(f"http://127.0.0.1:{port}",
                                         headers={"Authorization": f"Bearer {token}"},
                                         connector=aiohttp.TCPConnector(limit=1),
                                         timeout=aiohttp.ClientTimeout(30))
                   for _ in range(CONCURRENCY)]
        free = asyncio.Queue()
        for client in clients:
            free.put_nowait(client)
        try:
            await gateway.discover()
            bare_run = await bare_round_trip(gateway)

            async def http_run():
                client = await free.get()
                try:
                    async with client.post("/api/v1/runs", json=RUN_BODY) as response:
                        outcome = await response.json()
                    if response.status != 201 or outcome["status"] != "completed":
                        raise SystemExit(f"run failed: {response.status} {outcome}")
                finally:
                    free.put_nowait(client)

            results = await measure({"bare": bare_run, "http": http_run}, runs, seconds)
        finally:
            for client in clients:
                await client.close()
            await gateway.stop()
        web_rss, others = rss_mib(server.pid), runtime_rss(server.pid)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()

    bare, http = results["bare"], results["http"]
    for name, result in results.items():
        print(f"{name:>6}: median {result['median'] * 1000:.2f} ms, "
              f"p95 {result['p95'] * 1000:.2f} ms, {CONCURRENCY}-way {result['throughput']:.1f} runs/s")
    print(f"cold start to the first plugin run over HTTP: {cold_start:.2f} s; "
          f"web process RSS after the load: {web_rss:.0f} MiB ({others})")
    print("targets: latency_ratio <= 1.8, throughput_ratio >= 0.6, cold_start_s <= 2.5, "
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
