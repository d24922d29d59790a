"""Spawning and reaping the runtime process so that nothing outlives the host.

- The runtime runs in its own process group (``start_new_session``); the
  plugin processes it spawns inherit that group, so one ``killpg`` reaches
  the runtime and every plugin, including plugins orphaned by a runtime
  that was SIGKILLed.
- The runtime and its plugins get an allow-listed environment (`runtime_environment`):
  never LangHost's secrets (``DJANGO_SECRET_KEY``, the admin's password, the database's or
  Redis' URL, provider keys), which a plugin could read from its own environment or from
  ``/proc/<runtime>/environ``.
- Given a `Sandbox`, the runtime runs confined by bubblewrap (`sandbox.py`): the process
  spawned is bubblewrap, the leader of the group; ``runtime_pid`` on the returned process is
  the runtime's own pid, the one signals and pings are about.
- ``PR_SET_PDEATHSIG(SIGTERM)`` makes the kernel signal the runtime when the
  host dies, even by SIGKILL (EOF on its stdin alone does not stop it).
  SIGTERM rather than SIGKILL: the runtime turns SIGTERM into an orderly
  shutdown that stops its plugins, whereas a SIGKILLed runtime leaves them
  to notice their closed stdin on their own. The signal fires when the
  *thread* that spawned the runtime exits, so the link's event loop must run
  in a thread that lives as long as the process (the main thread, or a
  long-lived bridge thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import signal
import socket
import sys
from pathlib import Path

from runners.runtime.sandbox import Sandbox

PR_SET_PDEATHSIG = 1

# Loaded before any fork: the preexec hook must not import or allocate much.
_libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None

# pip must never reach the network even if a flag is lost (runtime-protocol.md section 9).
DEAD_PYPI_INDEX = "http://127.0.0.1:9/simple"
RUNTIME_MAIN = Path(__file__).with_name("runtime_main.py")

TERMINATE_GRACE_SECONDS = 2.0
# What the runtime and its plugins see of the host's environment: where programs and text
# encodings are, the SDK's own settings (but the control token of a ws runtime), and how
# many crashes in a row stop a plugin (`runtime_main.py`).
PASSED_VARIABLES = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ", "PYTHONPATH",
                    "LANGHOST_PLUGIN_MAX_CRASHES")
SDK_PREFIX = "LANGBOT_"
WITHHELD_SDK_VARIABLES = {"LANGBOT_PLUGIN_RUNTIME_CONTROL_TOKEN"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def die_with_parent(parent_pid: int):
    def hook() -> None:
        if _libc is not None:
            _libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        # The parent may have died between fork and prctl: then no signal comes.
        if os.getppid() != parent_pid:
            os._exit(1)

    return hook


def runtime_environment(runtime_dir: str) -> dict[str, str]:
    """The runtime's environment: only what it needs of the host's (`PASSED_VARIABLES`, the
    SDK's `LANGBOT_` settings), its own dir as home, pip pointed nowhere."""
    env = {name: value for name, value in os.environ.items()
           if name in PASSED_VARIABLES
           or (name.startswith(SDK_PREFIX) and name not in WITHHELD_SDK_VARIABLES)}
    env.update(HOME=str(runtime_dir), PYTHONUNBUFFERED="1",
               LANGBOT_PLUGIN_PYPI_INDEX_URL=DEAD_PYPI_INDEX)
    return env


def _child_pid(info_fd: int) -> int | None:
    """The runtime's pid, from what bubblewrap writes to `info_fd` once the sandbox is up;
    None when it never came up."""
    decoder, data = json.JSONDecoder(), b""
    with os.fdopen(info_fd, "rb") as info:
        while chunk := info.read1(4096):
            data += chunk
            with contextlib.suppress(ValueError):
                return decoder.raw_decode(data.decode())[0]["child-pid"]
    return None


async def spawn_runtime(runtime_dir: str, debug_port: int,
                        sandbox: Sandbox | None = None) -> asyncio.subprocess.Process:
    """Start ``rt`` over stdio, its servers on loopback only, confined by `sandbox` if given;
    it loads plugins from ``runtime_dir/data/plugins``."""
    env = runtime_environment(runtime_dir) | (sandbox.runtime_environment() if sandbox else {})
    info_read, info_write = os.pipe() if sandbox is not None else (None, None)
    confined = sandbox.argv(runtime_dir, info_write) if sandbox is not None else []
    try:
        process = await _spawn(confined, runtime_dir, debug_port, env,
                               (info_write,) if sandbox is not None else ())
    finally:
        if info_write is not None:
            os.close(info_write)
    process.runtime_pid = process.pid
    if info_read is not None:
        process.runtime_pid = await asyncio.to_thread(_child_pid, info_read) or process.pid
    return process


async def _spawn(confined: list[str], runtime_dir: str, debug_port: int, env: dict,
                 pass_fds: tuple) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *confined,
        sys.executable,
        str(RUNTIME_MAIN),
        "rt",
        "--stdio-control",
        "--skip-deps-check",
        "--ws-debug-port",
        str(debug_port),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        # Its log is the only place the runtime says why a plugin failed: the link reads it.
        stderr=asyncio.subprocess.PIPE,
        cwd=runtime_dir,
        env=env,
        pass_fds=pass_fds,
        start_new_session=True,
        preexec_fn=die_with_parent(os.getpid()),
        # Frames are JSON lines of at most 16 KiB (larger ones are chunked).
        limit=1024 * 1024,
    )


def kill_group(pgid: int) -> None:
    """SIGKILL whatever is left of a runtime's process group (plugins included)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


async def stop_runtime(process: asyncio.subprocess.Process) -> None:
    """SIGTERM (the runtime stops its plugins), a grace period, then SIGKILL the group."""
    try:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                # The runtime itself (in a sandbox, not bubblewrap, which would not pass it on).
                os.kill(getattr(process, "runtime_pid", process.pid), signal.SIGTERM)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(TERMINATE_GRACE_SECONDS):
                    await process.wait()
    finally:
        # Also when cancelled during the grace period: nothing of the group survives.
        kill_group(process.pid)
    await process.wait()
