"""Confining the plugin runtime and its plugins with bubblewrap (Debian's `bubblewrap`).

Inside the sandbox the whole filesystem is read-only; LangHost's data dir (its database,
secret key, instance id, artifacts) is an empty directory; only the runtime's own dir and the
plugin folders it loads are writable. (`/tmp` stays as it is, read-only: the interpreter or
the checkout may live there.) The runtime is pid 1 of its
own pid namespace, so no process of the host is visible (nor its `/proc/<pid>/environ`);
every capability is dropped (as root, bubblewrap would otherwise keep them, and could undo
its own mounts); and the sandbox dies with the process that started it. The network is the
host's: plugins may call out, and the runtime listens on loopback for them.

`LANGHOST_PLUGIN_SANDBOX`: `auto` (confine when bubblewrap works here, else run unconfined
and say so in the log), `bwrap` (confine, or do not start the runtime), `off`.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

MODES = ("auto", "bwrap", "off")


class SandboxUnavailable(RuntimeError):
    """`LANGHOST_PLUGIN_SANDBOX=bwrap`, and bubblewrap cannot confine a process here."""


@dataclass(frozen=True)
class Sandbox:
    """What the runtime must not see (`hidden`: directories become empty, files empty)."""

    hidden: tuple[str, ...]
    bwrap: str

    def argv(self, runtime_dir: str, info_fd: int) -> list[str]:
        """bubblewrap's arguments for a runtime working in `runtime_dir`, ending in `--`."""
        argv = [self.bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        for path in self.hidden:
            if os.path.isdir(path):
                argv += ["--tmpfs", path]
            elif os.path.exists(path):
                argv += ["--ro-bind", "/dev/null", path]
        # After the tmpfs mounts (bubblewrap applies them in order): the writable places,
        # outermost first.
        for path in sorted(_writable(runtime_dir), key=lambda path: path.count(os.sep)):
            argv += ["--bind", path, path]
        return argv + ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--as-pid-1",
                       "--die-with-parent", "--cap-drop", "ALL", "--info-fd", str(info_fd),
                       "--chdir", runtime_dir, "--"]


def _writable(runtime_dir: str) -> set[str]:
    """The runtime's dir and the folders its plugins are loaded from (links resolved)."""
    places = {os.path.realpath(runtime_dir)}
    plugins = Path(runtime_dir) / "data" / "plugins"
    if plugins.is_dir():
        places.update(os.path.realpath(entry) for entry in plugins.iterdir())
    return places


@functools.cache
def _probe(bwrap: str) -> str | None:
    """Why bubblewrap cannot confine a process here, or None when it can."""
    try:
        done = subprocess.run(
            [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid",
             "--as-pid-1", "--die-with-parent", "--cap-drop", "ALL", "--", sys.executable,
             "-c", "pass"], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None if done.returncode == 0 else (done.stderr.decode(errors="replace").strip()
                                              or f"exit code {done.returncode}")


def sandbox_for(mode: str, hidden: list[str]) -> Sandbox | None:
    """The sandbox `mode` asks for, hiding `hidden`; None to run unconfined."""
    if mode not in MODES:
        raise SandboxUnavailable(f"LANGHOST_PLUGIN_SANDBOX is {mode!r}; use one of {MODES}")
    if mode == "off":
        return None
    bwrap = shutil.which("bwrap")
    problem = _probe(bwrap) if bwrap else "bubblewrap is not installed (apt install bubblewrap)"
    if problem is None:
        return Sandbox(hidden=tuple(os.path.realpath(path) for path in hidden), bwrap=bwrap)
    if mode == "bwrap":
        raise SandboxUnavailable(f"the plugin sandbox cannot start: {problem}")
    logger.warning("plugins run unconfined (LANGHOST_PLUGIN_SANDBOX=auto): %s", problem)
    return None
