"""Work in a conversation's box: its workspace, commands run in it, its files.

Each conversation has a workspace of its own, a directory under the data dir
(`box/workspaces/<id>`), which the box server mounts as `/workspace` of the conversation's
session: a command sees it as its working directory, and the host reads and writes its files
directly. A path is the workspace's (`notes.txt`, `/workspace/notes.txt`); one that leads out
of it (`../../etc/passwd`, `/etc/passwd`, a link pointing out) is refused.

A message's saved files are copied into the workspace's inbox (`/workspace/inbox/`), and a
file of the workspace can be saved as a conversation artifact.

Limits per call are settings: a command's time (`LANGHOST_BOX_EXEC_SECONDS`, cut off past it),
memory (`LANGHOST_BOX_MEMORY_MB`, as the command's address-space limit), and the output a
caller gets back (`LANGHOST_BOX_OUTPUT_BYTES`); a file written or read is at most
`LANGHOST_BOX_FILE_BYTES`.
"""

import contextlib
import functools
import hashlib
import json
import logging
import os
import shlex
import stat
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from asgiref.sync import sync_to_async
from django.conf import settings
from langbot_plugin.box.models import BoxSpec

from ledger.services.artifacts import ArtifactNotFound, artifacts, conversation_file, max_bytes
from runners.box.server import BoxUnavailable, box_server

logger = logging.getLogger(__name__)

MOUNT = "/workspace"
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
    server cannot run it (it died, or never started)."""
    if not isinstance(command, str) or not command.strip():
        raise BoxError("a command is a non-empty string")
    limit = min(timeout or settings.LANGHOST_BOX_EXEC_SECONDS, settings.LANGHOST_BOX_EXEC_SECONDS)
    await sync_to_async(workspace.ensure)()
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
