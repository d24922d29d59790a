"""Confining the plugin runtime and its plugins with bubblewrap (Debian's `bubblewrap`).

Inside the sandbox the whole filesystem is read-only; LangHost's data dir (its database,
secret key, instance id, artifacts) is an empty directory; only the runtime's own dir and the
plugin folders it loads are writable. (`/tmp` stays as it is, read-only: the interpreter or
the checkout may live there.) The runtime is pid 1 of its
own pid namespace, so no process of the host is visible (nor its `/proc/<pid>/environ`);
every capability is dropped (as root, bubblewrap would otherwise keep them, and could undo
its own mounts) but the one bubblewrap needs to start each plugin in a sandbox of its own
(`runtime_main.py`), where a plugin sees neither the runtime's dir nor the other plugins' and
has no capability at all; and the sandbox dies with the process that started it. The network
is the host's: plugins may call out, and the runtime listens on loopback for them. Where
sandboxes cannot nest (bubblewrap without root), the plugins share the runtime's.

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
    per_plugin: bool  # each plugin in a sandbox of its own, inside the runtime's

    def argv(self, runtime_dir: str, info_fd: int) -> list[str]:
        """bubblewrap's arguments for a runtime working in `runtime_dir`, ending in `--`."""
        argv = self._hiding(_writable(runtime_dir))
        argv += ["--cap-drop", "ALL", *(["--cap-add", "CAP_SYS_ADMIN"] if self.per_plugin else [])]
        return argv + ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--as-pid-1",
                       "--die-with-parent", "--info-fd", str(info_fd), "--chdir", runtime_dir,
                       "--"]

    def _hiding(self, writable) -> list[str]:
        """The filesystem: read-only, `hidden` empty, `writable` (real paths) writable."""
        argv = [self.bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        for path in self.hidden:
            if os.path.isdir(path):
                argv += ["--tmpfs", path]
            elif os.path.exists(path):
                argv += ["--ro-bind", "/dev/null", path]
        # After the tmpfs mounts (bubblewrap applies them in order): the writable places,
        # outermost first.
        for path in sorted(writable, key=lambda path: path.count(os.sep)):
            argv += ["--bind", path, path]
        return argv

    def command_argv(self, writable: list[str]) -> list[str]:
        """bubblewrap's arguments for a one-off command (pip installing a plugin's packages)
        that may write only in `writable`, sees nothing `hidden`, and holds no capability."""
        return self._hiding(map(os.path.realpath, writable)) + [
            "--unshare-pid", "--unshare-ipc", "--die-with-parent", "--new-session",
            "--cap-drop", "ALL", "--"]

    def runtime_environment(self) -> dict[str, str]:
        """What the runtime is told about sandboxing its plugins (`runtime_main.py`)."""
        return {"LANGHOST_PLUGIN_BWRAP": self.bwrap} if self.per_plugin else {}


def _writable(runtime_dir: str) -> set[str]:
    """The runtime's dir and the folders its plugins are loaded from (links resolved)."""
    places = {os.path.realpath(runtime_dir)}
    plugins = Path(runtime_dir) / "data" / "plugins"
    if plugins.is_dir():
        places.update(os.path.realpath(entry) for entry in plugins.iterdir())
    return places


def _confining(bwrap: str, *caps: str) -> list[str]:
    return [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid",
            "--die-with-parent", "--cap-drop", "ALL", *caps, "--"]


@functools.cache
def _probe(bwrap: str, nested: bool) -> str | None:
    """Why bubblewrap cannot confine a process here (`nested`: inside a runtime's sandbox),
    or None when it can."""
    argv = [*_confining(bwrap), sys.executable, "-c", "pass"]
    if nested:
        argv = [*_confining(bwrap, "--cap-add", "CAP_SYS_ADMIN"), *argv]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=30, check=False)
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
    problem = _probe(bwrap, False) if bwrap else "bubblewrap is not installed (apt install bubblewrap)"
    if problem is None:
        nesting_problem = _probe(bwrap, True)
        if nesting_problem:
            logger.warning("plugins share their runtime's sandbox: %s", nesting_problem)
        return Sandbox(hidden=tuple(os.path.realpath(path) for path in hidden), bwrap=bwrap,
                       per_plugin=nesting_problem is None)
    if mode == "bwrap":
        raise SandboxUnavailable(f"the plugin sandbox cannot start: {problem}")
    logger.warning("plugins run unconfined (LANGHOST_PLUGIN_SANDBOX=auto): %s", problem)
    return None
