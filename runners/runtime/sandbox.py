"""Confining the plugin runtime, its plugins, pip and box commands, by allow-list.

A confined process sees only what `readable_paths()` lists, read-only (the system's programs
and libraries, a few files of /etc, the Python installation and the runtime's own code), and
what its caller makes writable (the runtime's dir and its plugins' folders; one plugin's own
folder; a conversation's workspace). Nothing else of the machine is there: no data dir of any
LangHost, no other plugin or workspace, no /etc/shadow, no process of the host (its own PID
namespace). No capability, no new privileges, and no TCP connection to `closed_ports` (the
host's own web port, database and Redis, by Landlock) unless the operator opens them.

Two engines give that view:
- `bwrap`, Debian's bubblewrap, the first choice where it works (`make test` installs it);
- `namespaces`, `confine.py`: the same from Python and the kernel alone (unprivileged user,
  mount and PID namespaces, Landlock), for machines without bubblewrap, as `make run` leaves
  a newcomer's.

`LANGHOST_PLUGIN_SANDBOX`: `auto` (the first engine that works; unconfined, and said
everywhere, if none does), `required` (the first that works, or nothing starts), `bwrap` or
`namespaces` (that one, or nothing starts), `off` (unconfined: the operator's choice, said
everywhere).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

MODES = ("auto", "required", "bwrap", "namespaces", "off")
CONFINE = str(Path(__file__).with_name("confine.py"))
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# What programs read of /etc: names, certificates, time zones, the dynamic linker's cache.
ETC_ENTRIES = ("ssl/certs", "ca-certificates", "ca-certificates.conf", "pki", "resolv.conf", "hosts",
               "host.conf", "nsswitch.conf", "gai.conf", "services", "protocols", "passwd",
               "group", "localtime", "timezone", "mime.types", "ld.so.cache", "ld.so.conf",
               "ld.so.conf.d", "alternatives", "os-release", "debian_version")
PROBE_SECONDS = 30
PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus")
_probing = threading.Lock()
PLUGIN_SANDBOX_VARIABLE = "LANGHOST_PLUGIN_CONFINEMENT"
CLOSED_PORTS_VARIABLE = "LANGHOST_CLOSED_PORTS"


class SandboxUnavailable(RuntimeError):
    """The mode asks for confinement that cannot be had here."""


def readable_paths() -> tuple[str, ...]:
    """What every confined process may read (and nothing of it write)."""
    python = {sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix}
    candidates = [*SYSTEM_DIRS, *(f"/etc/{entry}" for entry in ETC_ENTRIES),
                  *sorted(python), str(Path(__file__).parent)]
    return tuple(path for path in candidates
                 if os.path.exists(path) and os.path.realpath(path) != "/")


@dataclass(frozen=True)
class Sandbox:
    engine: str  # "bwrap" or "namespaces"
    readable: tuple[str, ...]
    closed_ports: tuple[int, ...] = ()
    # Places to keep out of sight (LangHost's data dir, its database) where a readable path
    # holds them (a checkout under /usr, say).
    hidden: tuple[str, ...] = ()
    bwrap: str = ""
    per_plugin: bool = True  # each plugin in a sandbox of its own, inside the runtime's

    def argv(self, runtime_dir: str, info_fd: int) -> list[str]:
        """The prefix confining a runtime working in `runtime_dir`, ending in `--`."""
        binds = self._view(writable=_writable(runtime_dir))
        if self.engine == "namespaces":
            return self._confine(binds, runtime_dir, self.closed_ports, info_fd=info_fd)
        caps = ["--cap-add", "CAP_SYS_ADMIN"] if self.per_plugin else []
        return [*self._bwrap_view(binds), "--cap-drop", "ALL", *caps, "--unshare-pid",
                "--unshare-ipc", "--unshare-uts", "--as-pid-1", "--die-with-parent",
                "--info-fd", str(info_fd), "--chdir", runtime_dir, "--"]

    def command_argv(self, writable: list[str], workdir: str) -> list[str]:
        """The prefix confining a one-off command (pip installing a plugin's packages) that
        reads `workdir` and writes only `writable`."""
        binds = self._view(writable=writable, readable=[workdir])
        if self.engine == "namespaces":
            return self._confine(binds, workdir, self.closed_ports)
        return [*self._bwrap_view(binds), "--unshare-pid", "--unshare-ipc", "--die-with-parent",
                "--new-session", "--cap-drop", "ALL", "--chdir", workdir, "--",
                *self._inside_bwrap(self.closed_ports)]

    def plugin_argv(self, folder: str) -> list[str]:
        """The prefix confining one plugin (run by the runtime, inside its own sandbox): the
        plugin's folder its only writable place, no other plugin's nor the runtime's dir.
        No port is closed again: a plugin is within its runtime's Landlock domain."""
        own = os.path.realpath(folder)
        binds = self._view(writable=[own])
        if self.engine == "namespaces":
            return self._confine(binds, own, ())
        return [*self._bwrap_view(binds), "--unshare-pid", "--unshare-ipc", "--die-with-parent",
                "--new-session", "--cap-drop", "ALL", "--chdir", own, "--"]

    def box_argv(self, workspace: str, mount: str, network: bool, limits: dict) -> list[str]:
        """The prefix confining one box command: `workspace` writable as `mount`, its working
        directory; no network unless `network` (and then not LangHost's ports); `limits`
        (`confine.RLIMITS`' names) on it and on every process it starts."""
        binds = [*self._view(), (os.path.realpath(workspace), mount, True)]
        closed = self.closed_ports if network else ()
        if self.engine == "namespaces":
            return self._confine(binds, mount, closed, network=network, limits=limits)
        return [*self._bwrap_view(binds), "--unshare-all", *(["--share-net"] if network else []),
                "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--chdir", mount,
                "--", *self._inside_bwrap(closed, limits)]

    def _view(self, writable=(), readable=()) -> list[tuple[str, str, bool]]:
        """`(source, target, writable)` of each place a confined process sees; a source of ""
        hides its target (an empty directory or file in its place)."""
        readable = [*self.readable, *map(os.path.realpath, readable)]
        hidden = [path for path in map(os.path.realpath, self.hidden)
                  if any(path == place or path.startswith(place.rstrip(os.sep) + os.sep)
                         for place in readable)]
        return [*((path, path, False) for path in readable),
                *(("", path, False) for path in hidden),
                *((os.path.realpath(path), os.path.realpath(path), True) for path in writable)]

    def _bwrap_view(self, binds) -> list[str]:
        argv = [self.bwrap, "--tmpfs", "/", "--dev", "/dev", "--proc", "/proc",
                # The kernel's settings: uid 0 may write them, capabilities or not.
                *[arg for entry in PROC_READ_ONLY if os.path.exists(f"/proc/{entry}")
                  for arg in ("--ro-bind", f"/proc/{entry}", f"/proc/{entry}")],
                "--tmpfs", "/tmp"]
        # Outermost first (bubblewrap applies them in order), before the root turns read-only.
        for source, target, writable in sorted(binds, key=lambda bind: bind[1].count(os.sep)):
            if not source:
                argv += (["--tmpfs", target] if os.path.isdir(target)
                         else ["--ro-bind", os.devnull, target])
            else:
                argv += ["--bind" if writable else "--ro-bind", source, target]
        return [*argv, "--remount-ro", "/"]

    def _inside_bwrap(self, closed_ports, limits=None) -> list[str]:
        """Inside bubblewrap: `confine.py` closing the ports (Landlock) and setting the limits
        before the command, where there are any."""
        if not (closed_ports or limits):
            return []
        plan = {"namespaces": False, "closed_ports": list(closed_ports), "limits": limits or {}}
        return [sys.executable, CONFINE, json.dumps(plan), "--"]

    def _confine(self, binds, workdir: str, closed_ports, *, network=True, limits=None,
                 info_fd=None) -> list[str]:
        plan = {"binds": binds, "closed_ports": list(closed_ports), "chdir": workdir,
                "network": network, "limits": limits or {}}
        if info_fd is not None:
            plan["info_fd"] = info_fd
        return [sys.executable, CONFINE, json.dumps(plan), "--"]

    def runtime_environment(self) -> dict[str, str]:
        """What the runtime is told to confine each plugin with, and, in bubblewrap, the ports
        to close to itself and its plugins before it starts any (`runtime_main.py`: no
        interpreter started only for that)."""
        told = {}
        if self.engine == "bwrap" and self.closed_ports:
            told[CLOSED_PORTS_VARIABLE] = json.dumps(self.closed_ports)
        if self.per_plugin:
            told[PLUGIN_SANDBOX_VARIABLE] = json.dumps(
                {"engine": self.engine, "readable": self.readable, "bwrap": self.bwrap})
        return told

    @classmethod
    def for_plugins(cls, environment: str) -> Sandbox:
        """The sandbox `runtime_environment()` described."""
        described = json.loads(environment)
        return cls(**{**described, "readable": tuple(described["readable"])})


def _writable(runtime_dir: str) -> set[str]:
    """The runtime's dir and the folders its plugins are loaded from (links resolved)."""
    places = {os.path.realpath(runtime_dir)}
    plugins = Path(runtime_dir) / "data" / "plugins"
    if plugins.is_dir():
        places.update(os.path.realpath(entry) for entry in plugins.iterdir())
    return places


def _runs(argv: list[str]) -> str | None:
    """Why `argv` (a confined `python -c pass`) fails here, or None when it runs."""
    try:
        done = subprocess.run(argv, capture_output=True, timeout=PROBE_SECONDS, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None if done.returncode == 0 else (done.stderr.decode(errors="replace").strip()
                                              or f"exit code {done.returncode}")


def _probe(engine: str) -> tuple[str | None, bool]:
    """Why `engine` cannot confine a process here (None when it can), and whether a process
    it confines can confine another (each plugin inside the runtime's sandbox). Probed once a
    process; a caller meanwhile waits for that answer."""
    with _probing:
        return _probed(engine)


def probe_in_background(mode: str) -> None:
    """Probe what `mode` would confine with, now, beside other start-up work, for whoever asks
    first."""
    threading.Thread(target=confinement, args=(mode,), name="sandbox-probe",
                     daemon=True).start()


@functools.cache
def _probed(engine: str) -> tuple[str | None, bool]:
    if engine == "bwrap" and not shutil.which("bwrap"):
        return "bubblewrap is not installed (apt install bubblewrap)", False
    sandbox = Sandbox(engine, readable_paths(), bwrap=shutil.which("bwrap") or "")
    here = os.path.realpath(os.getcwd())
    python = [sys.executable, "-c", "pass"]
    problem = _runs([*sandbox.command_argv([], here), *python])
    if problem is not None:
        return problem, False
    read, write = os.pipe()
    try:
        outer = sandbox.argv(here, write)
    finally:
        os.close(read)
        os.close(write)
    nested = _runs([*_without_info_fd(outer), *sandbox.plugin_argv(here), *python])
    if nested:
        logger.warning("plugins share their runtime's sandbox: %s", nested)
    return None, nested is None


def _without_info_fd(argv: list[str]) -> list[str]:
    if "--info-fd" in argv:
        index = argv.index("--info-fd")
        return argv[:index] + argv[index + 2:]
    index = argv.index(CONFINE) + 1
    plan = json.loads(argv[index])
    plan.pop("info_fd")
    return [*argv[:index], json.dumps(plan), *argv[index + 1:]]


ENGINES = {"auto": ("bwrap", "namespaces"), "required": ("bwrap", "namespaces"),
           "bwrap": ("bwrap",), "namespaces": ("namespaces",), "off": ()}


def sandbox_for(mode: str, closed_ports=(), hidden=()) -> Sandbox | None:
    """The sandbox `mode` asks for, closing `closed_ports` and keeping `hidden` out of sight;
    None to run unconfined. SandboxUnavailable when the mode insists and no engine works
    here."""
    if mode not in MODES:
        raise SandboxUnavailable(f"LANGHOST_PLUGIN_SANDBOX is {mode!r}; use one of {MODES}")
    problems = []
    for engine in ENGINES[mode]:
        problem, nests = _probe(engine)
        if problem is None:
            return Sandbox(engine, readable_paths(), tuple(sorted(set(closed_ports))),
                           tuple(hidden), bwrap=shutil.which("bwrap") or "", per_plugin=nests)
        problems.append(f"{engine}: {problem}")
    if mode in ("auto", "off"):
        if problems:
            logger.warning("plugins run unconfined (LANGHOST_PLUGIN_SANDBOX=auto): %s",
                           "; ".join(problems))
        return None
    raise SandboxUnavailable(f"the plugin sandbox cannot start: {'; '.join(problems)}")


def confinement(mode: str) -> str | None:
    """The engine that confines plugins in `mode` here, None when they run unconfined."""
    return next((engine for engine in ENGINES.get(mode, ()) if _probe(engine)[0] is None), None)
