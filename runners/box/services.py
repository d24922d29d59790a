"""Work in a conversation's box: its workspace, commands run in it, its files.

Each conversation has a workspace of its own, a directory under the data dir
(`box/workspaces/<id>`), which the box server mounts as `/workspace` of the conversation's
session: a command sees it as its working directory, and the host reads and writes its files
directly. A path is the workspace's (`notes.txt`, `/workspace/notes.txt`); one that leads out
of it (`../../etc/passwd`, `/etc/passwd`, a link pointing out) is refused.

A message's saved files are copied into the workspace's inbox (`/workspace/inbox/`), and a
file of the workspace can be saved as a conversation artifact.

Commands run on the `sandbox` backend (the default): confined as plugins are
(`runners.runtime.sandbox`), they see the system, Python and `/workspace`, nothing of the data
dir or of other workspaces, no process of the host, and no network unless its agent type
allows it (`box_network`; LangHost's own ports stay closed). `host-unsafe` (the SDK's
`host`, run as this machine's user, isolated from nothing) and the SDK's isolating backends
(`nsjail`, `docker`, `e2b`) run them through the SDK's box server.

Limits per call are settings: a command's time (`LANGHOST_BOX_EXEC_SECONDS`, cut off past it),
memory (`LANGHOST_BOX_MEMORY_MB`, as the command's address-space limit), processes
(`LANGHOST_BOX_PROCESSES`; the kernel does not count root's), and the output a caller gets
back (`LANGHOST_BOX_OUTPUT_BYTES`); a file written or read is at most
`LANGHOST_BOX_FILE_BYTES`. A command cut off by a limit says so at the end of its stderr.
"""

import asyncio
import contextlib
import functools
import hashlib
import json
import logging
import os
import shlex
import signal
import stat
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from asgiref.sync import sync_to_async
from django.conf import settings
from langbot_plugin.box.models import BoxSpec

from ledger.services.artifacts import ArtifactNotFound, artifacts, conversation_file, max_bytes
from runners.box.server import SDK_BACKENDS, BoxUnavailable, box_server
from runners.runtime.sandbox import Sandbox, SandboxUnavailable, sandbox_for

logger = logging.getLogger(__name__)

MOUNT = "/workspace"
SANDBOX = "sandbox"  # LangHost's own backend; the others are the SDK's box server's
BACKENDS = (SANDBOX, *SDK_BACKENDS)
OPEN_FILES = 1024
BOX_ENVIRONMENT = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": MOUNT, "TMPDIR": "/tmp",
                   "LANG": "C.UTF-8", "LANGBOT_BOX_WORKSPACE": MOUNT}
# How a program says it could not have the memory it asked for (Python, C's strerror, bash).
MEMORY_SIGNS = ("MemoryError", "Cannot allocate memory", "out of memory", "std::bad_alloc")
INBOX = "inbox"
ARTIFACT_REF = "artifact:"


class BoxError(ValueError):
    """A request the box refuses (a path out of the workspace, a file too large, ...)."""


# A file the host writes into a workspace: readable by the box, whichever user it runs as.
FILE_MODE = 0o644


def workspaces_dir() -> Path:
    return Path(settings.DATA_DIR) / "box" / "workspaces"


@dataclass(frozen=True)
class Workspace:
    """A conversation's workspace: the box session and the directory it mounts."""

    project_id: str
    conversation_id: str
    network: bool = False  # whether its commands may reach the network (its agent type's)

    @property
    def session_id(self) -> str:
        return "conv-" + hashlib.sha256(self.conversation_id.encode()).hexdigest()[:24]

    @property
    def directory(self) -> Path:
        return workspaces_dir() / self.session_id

    def ensure(self) -> Path:
        """The workspace's directory, made (and its conversation noted beside it) if new."""
        if not self.directory.is_dir():
            self.directory.mkdir(parents=True, exist_ok=True)
            (workspaces_dir() / f"{self.session_id}.json").write_text(json.dumps(
                {"project_id": self.project_id, "conversation_id": self.conversation_id}))
        return self.directory

    def path(self, name: str) -> Path:
        """Where `name` (relative, or under /workspace) is; BoxError when out of it."""
        if not isinstance(name, str) or not name or "\x00" in name:
            raise BoxError("a path is a non-empty string")
        relative = name[len(MOUNT):].lstrip("/") if name == MOUNT or name.startswith(
            MOUNT + "/") else name
        if relative.startswith("/"):
            raise BoxError(f"{name} is outside the workspace ({MOUNT})")
        root = self.directory.resolve()
        target = (root / relative).resolve()
        if target != root and root not in target.parents:
            raise BoxError(f"{name} is outside the workspace ({MOUNT})")
        return target

    def spec(self, cmd: str = "", timeout: int | None = None) -> BoxSpec:
        directory = str(self.directory.resolve())
        if shlex.quote(directory) != directory:
            raise BoxError(f"the data dir's path ({directory}) cannot hold a box workspace: "
                           "it needs a path without spaces or quotes")
        return BoxSpec(session_id=self.session_id, cmd=cmd, workdir=MOUNT,
                       timeout_sec=timeout or settings.LANGHOST_BOX_EXEC_SECONDS,
                       host_path=directory, host_path_mode="rw")


@dataclass(frozen=True)
class Executed:
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    duration_ms: int

    def as_dict(self) -> dict:
        return {"exit_code": self.exit_code, "stdout": self.stdout, "stderr": self.stderr,
                "timed_out": self.timed_out, "duration_ms": self.duration_ms}


def _bounded(text: str) -> str:
    limit = settings.LANGHOST_BOX_OUTPUT_BYTES
    data = text.encode()
    if len(data) <= limit:
        return text
    return data[:limit].decode(errors="ignore") + f"\n[output cut at {limit} bytes]"


async def execute(workspace: Workspace, command: str, timeout: int | None = None) -> Executed:
    """Run `command` (a shell command line) in the workspace; BoxUnavailable when the box
    cannot run it (no backend here, or the SDK's box server died)."""
    if not isinstance(command, str) or not command.strip():
        raise BoxError("a command is a non-empty string")
    limit = min(timeout or settings.LANGHOST_BOX_EXEC_SECONDS, settings.LANGHOST_BOX_EXEC_SECONDS)
    await sync_to_async(workspace.ensure)()
    if settings.LANGHOST_BOX_BACKEND == SANDBOX:
        return await _execute_confined(workspace, command, limit)
    memory_kb = settings.LANGHOST_BOX_MEMORY_MB * 1024
    spec = workspace.spec(f"ulimit -v {memory_kb} 2>/dev/null; {command}", limit)
    server = box_server()
    client = await server.ready()
    try:
        result = await client.execute(spec, action_context=server.context(workspace.project_id))
    except Exception as exc:  # the box server died under the call, or refused it
        raise BoxUnavailable(f"the box could not run the command: {type(exc).__name__}: "
                             f"{exc}") from None
    timed_out = getattr(result.status, "value", result.status) == "timed_out"
    return Executed(result.exit_code, _bounded(result.stdout), _bounded(result.stderr),
                    timed_out, result.duration_ms)


def why_no_box() -> str | None:
    """Why an agent type cannot have the box here, or None. The `sandbox` backend needs the
    kernel's confinement; an SDK backend named is the operator's choice."""
    backend = settings.LANGHOST_BOX_BACKEND
    if backend not in BACKENDS:
        return (f"LANGHOST_BOX_BACKEND is {backend!r}, which is not a box backend: use "
                f"{SANDBOX!r} (the default, confined), {', '.join(map(repr, BACKENDS[1:]))}")
    if backend == SANDBOX:
        try:
            box_sandbox()
        except BoxUnavailable as exc:
            return (f"{exc}. The only box here would run a model's commands as LangHost's own "
                    "user: install bubblewrap, allow unprivileged user namespaces, or name "
                    "LANGHOST_BOX_BACKEND=host-unsafe to accept that risk")
    return None


def box_sandbox() -> Sandbox:
    """The confinement box commands run in (`sandbox` backend); BoxUnavailable when the
    kernel offers none here."""
    mode = settings.LANGHOST_PLUGIN_SANDBOX  # the engine it names, else the first that works
    try:
        sandbox = sandbox_for(mode if mode in ("bwrap", "namespaces") else "required",
                              settings.LANGHOST_SANDBOX_CLOSED_PORTS,
                              settings.LANGHOST_SANDBOX_HIDDEN)
    except SandboxUnavailable as exc:
        raise BoxUnavailable(f"the box cannot confine commands here ({exc}); see README: "
                             "The sandbox box") from None
    return sandbox


async def _execute_confined(workspace: Workspace, command: str, seconds: int) -> Executed:
    """The `sandbox` backend: the command confined as plugins are (`runners.runtime.sandbox`),
    seeing the system, Python and `/workspace` only; its process tree killed past `seconds`."""
    limits = {"as": settings.LANGHOST_BOX_MEMORY_MB * 1024 * 1024, "cpu": seconds + 1,
              "nproc": settings.LANGHOST_BOX_PROCESSES, "nofile": OPEN_FILES}
    confined = (await sync_to_async(box_sandbox)()).box_argv(
        str(workspace.directory), MOUNT, workspace.network, limits)
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        *confined, "/bin/sh", "-c", command, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=BOX_ENVIRONMENT,
        start_new_session=True)
    reading = asyncio.gather(_kept(process.stdout), _kept(process.stderr), process.wait())
    timed_out = False
    try:
        async with asyncio.timeout(seconds):
            await asyncio.shield(reading)
    except TimeoutError:
        timed_out = True
    finally:  # the launcher's death ends its sandbox, every process in it
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    stdout, stderr, code = await reading
    # Stripped, as the SDK's backends give it.
    stdout, stderr = stdout.strip(), stderr.strip() + _cut_off_note(code, stderr, seconds,
                                                                       timed_out)
    return Executed(None if timed_out else code, _bounded(stdout), _bounded(stderr), timed_out,
                    int((time.monotonic() - started) * 1000))


async def _kept(stream: asyncio.StreamReader) -> str:
    """What a stream said, up to the output limit (the rest read and dropped)."""
    kept, limit = bytearray(), settings.LANGHOST_BOX_OUTPUT_BYTES + 1
    while chunk := await stream.read(65536):
        kept += chunk[:max(0, limit - len(kept))]
    return kept.decode(errors="replace")


def _cut_off_note(code: int, stderr: str, seconds: int, timed_out: bool) -> str:
    """Why the box stopped a command, when a limit did."""
    if timed_out:
        return f"\n[cut off: the command ran past its time limit of {seconds} s]"
    if code == 128 + signal.SIGXCPU:
        return f"\n[cut off: the command used its {seconds + 1} s of CPU time]"
    if code != 0 and any(sign in stderr for sign in MEMORY_SIGNS):
        return (f"\n[cut off: the command reached its memory limit of "
                f"{settings.LANGHOST_BOX_MEMORY_MB} MB]")
    return ""


def _os_errors_said(function):
    """The filesystem's refusals (a file where a directory is asked for, a name too long,
    no permission) as BoxErrors: what the caller reads, not a crash."""
    @functools.wraps(function)
    def said(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except OSError as exc:
            raise BoxError(f"{exc.strerror or type(exc).__name__}: "
                           f"{exc.filename or ''}".rstrip(": ")) from None
    return said


@_os_errors_said
def read_file(workspace: Workspace, name: str, limit: int | None = None) -> bytes:
    limit = limit or settings.LANGHOST_BOX_FILE_BYTES
    path = workspace.path(name)
    if not path.is_file():
        raise BoxError(f"{name} is not a file of the workspace")
    # Opened as it was checked: the box may have put a pipe or a link there since, which
    # must neither block the read nor lead it out of the workspace.
    with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW), "rb") as opened:
        found = os.fstat(opened.fileno())
        if not stat.S_ISREG(found.st_mode):
            raise BoxError(f"{name} is not a file of the workspace")
        if found.st_size > limit:
            raise BoxError(f"{name} is over {limit} bytes")
        return opened.read(limit)


@_os_errors_said
def write_file(workspace: Workspace, name: str, data: bytes, limit: int | None = None) -> Path:
    limit = limit or settings.LANGHOST_BOX_FILE_BYTES
    if len(data) > limit:
        raise BoxError(f"a file is at most {limit} bytes")
    path = workspace.path(name)
    if path == workspace.directory.resolve() or path.name in ("", ".", ".."):
        raise BoxError("a file needs a name")
    workspace.ensure()
    path.parent.mkdir(parents=True, exist_ok=True)
    # A new file moved into place: whatever the box left at the path (a pipe, a link) is
    # replaced, never opened, so the write cannot block on it or follow it out.
    handle, written = tempfile.mkstemp(dir=path.parent, prefix=".langhost-")
    try:
        with open(handle, "wb") as file:
            os.fchmod(file.fileno(), FILE_MODE)
            file.write(data)
        os.replace(written, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(written)
        raise
    return path


@_os_errors_said
def list_files(workspace: Workspace, name: str = MOUNT, limit: int = 500) -> list[dict]:
    """The files and directories under `name` (its whole tree, at most `limit`)."""
    root = workspace.path(name)
    if not root.exists():
        return []
    base = workspace.directory.resolve()
    found = []
    for path in sorted(root.rglob("*")):
        if len(found) >= limit:
            break
        found.append({"path": f"{MOUNT}/{path.relative_to(base)}",
                      "type": "directory" if path.is_dir() else "file",
                      "size": path.stat().st_size if path.is_file() else None})
    return found


def import_attachments(workspace: Workspace, scope: tuple[str, str, str],
                       attachments: list[dict], wanted: list | None = None) -> list[dict]:
    """A message's saved files (`attachments`, those whose `ref` is in `wanted` if given)
    copied into the workspace's inbox, as BoxFiles `{id, name, type, size, path}`. Two files
    of one name keep both (the second as `<n>-<name>`); a file that cannot be copied is left
    out, and the log says why."""
    items, taken = [], set()
    for attachment in attachments:
        ref = attachment.get("ref") or ""
        if not ref.startswith(ARTIFACT_REF) or (wanted is not None and ref not in wanted):
            continue
        given = (attachment.get("name") or ref[len(ARTIFACT_REF):]).replace("/", "_")
        given = given.lstrip(".") or ref[len(ARTIFACT_REF):]
        name, copy = given, 1
        while name in taken:
            copy += 1
            name = f"{copy}-{given}"
        try:
            loaded = artifacts.load(*scope, ref[len(ARTIFACT_REF):])
            path = write_file(workspace, f"{INBOX}/{name}", loaded.data, limit=max_bytes())
        except (ArtifactNotFound, BoxError) as exc:
            logger.warning("attachment %s not copied into the box: %s", ref, exc)
            continue
        taken.add(name)
        items.append({"id": ref, "name": name, "type": attachment.get("type") or "file",
                      "size": path.stat().st_size, "path": f"{MOUNT}/{INBOX}/{name}"})
    return items


def export_files(workspace: Workspace, scope: tuple[str, str, str], paths: list,
                 run_id: str) -> list[dict]:
    """Each file saved as a version of a conversation artifact, as BoxFiles (`id`
    `artifact:<name>`, and the `version` saved)."""
    items = []
    for path in paths:
        data = read_file(workspace, path, limit=max_bytes())
        name = conversation_file(workspace.path(path).name)
        version = artifacts.save(*scope, name, data=data,
                                 custom_metadata={"file_name": name, "run_id": run_id})
        items.append({"id": f"{ARTIFACT_REF}{name}", "name": name, "type": "file",
                      "size": len(data), "path": path, "version": version})
    return items


def workspaces() -> list[dict]:
    """Every conversation's workspace: its conversation, files, bytes and last change, newest
    first (what the runtime page shows)."""
    found = []
    for note in workspaces_dir().glob("*.json") if workspaces_dir().is_dir() else []:
        directory = note.with_suffix("")
        files = [path for path in directory.rglob("*") if path.is_file()]
        found.append({**json.loads(note.read_text()), "session_id": directory.name,
                      "files": len(files), "bytes": sum(path.stat().st_size for path in files),
                      "changed": datetime.fromtimestamp(max(
                          [path.stat().st_mtime for path in files] or [note.stat().st_mtime]),
                          tz=UTC)})
    return sorted(found, key=lambda workspace: workspace["changed"], reverse=True)
