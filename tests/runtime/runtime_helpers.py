"""Plain helpers shared by the runtime tests (no pytest, no Django)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from runners.runtime import RuntimeLink
from runners.runtime.process import DEAD_PYPI_INDEX, free_port
from tests.timing import scaled

FIXTURE_PLUGINS = Path(__file__).resolve().parent.parent / "fixtures" / "plugins"
QA = ("e2e", "agent-runner-qa")


def make_runtime_dir(root: Path, *plugin_dirs: str) -> Path:
    """A runtime cwd whose data/plugins holds copies of the named fixture plugins."""
    plugins = root / "data" / "plugins"
    plugins.mkdir(parents=True, exist_ok=True)
    for name in plugin_dirs:
        shutil.copytree(FIXTURE_PLUGINS / name, plugins / name)
    return root


def run_context(text: str = "hello", **overrides: Any) -> dict[str, Any]:
    """The smallest valid RunnerContext, plus overrides of top-level fields."""
    context: dict[str, Any] = {
        "run_id": f"run-{uuid.uuid4().hex[:12]}",
        "trigger": {"type": "message.received"},
        "event": {"event_id": "evt-1", "event_type": "message.received", "source": "api"},
        "input": {"text": text},
        "delivery": {"surface": "api"},
        "resources": {},
        "runtime": {},
    }
    context.update(overrides)
    return context


async def wait_for_runner(link: RuntimeLink, runner_id: str, timeout: float = 10.0) -> None:
    """Poll list_runners until ``runner_id`` is listed (the runtime announces nothing)."""
    timeout = scaled(timeout)  # tests/timing.py
    deadline = time.monotonic() + timeout
    while True:
        runners = await link.list_runners()
        if any(r["manifest"]["id"] == runner_id for r in runners):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{runner_id} not listed within {timeout}s: {runners}")
        await asyncio.sleep(0.05)


async def wait_until(predicate, timeout: float, what: str) -> None:
    timeout = scaled(timeout)  # tests/timing.py
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)


async def collect(link: RuntimeLink, runner: str, context: dict[str, Any]) -> list[dict]:
    return [item async for item in link.run_runner(*QA, runner, context)]


def group_pids(pgid: int) -> list[int]:
    """Live (non-zombie) processes of one process group, read from /proc."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        state, _ppid, pgrp = stat[stat.rindex(")") + 2 :].split()[:3]
        if int(pgrp) == pgid and state != "Z":
            pids.append(int(entry))
    return pids


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (ProcessLookupError, FileNotFoundError):
        return False
    return state != "Z"


TOKEN = "e2e-control-token-0123456789abcdef-xyz"


class ExternalRuntime:
    """``rt`` in ws mode, as an operator would run it, in its own process group."""

    def __init__(self, runtime_dir: Path):
        self.runtime_dir = runtime_dir
        self.control_port = free_port()
        self.debug_port = free_port()
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.control_port}/control/ws"

    def start(self) -> None:
        env = {
            **os.environ,
            "LANGBOT_PLUGIN_RUNTIME_CONTROL_TOKEN": TOKEN,
            "LANGBOT_PLUGIN_PYPI_INDEX_URL": DEAD_PYPI_INDEX,
        }
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "langbot_plugin.cli.__main__",
                "rt",
                "--ws-control-port",
                str(self.control_port),
                "--ws-debug-port",
                str(self.debug_port),
                "--skip-deps-check",
            ],
            cwd=self.runtime_dir,
            env=env,
            start_new_session=True,
        )

    def kill(self) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
