"""Artifacts: versioned files of a (project, user, conversation), after ADK's artifact service.

- Versions start at 1; each save writes latest + 1. Load/metadata take a version or the latest.
- Names starting with `user:` belong to the user (stored with an empty conversation id) and are
  visible from every conversation of that user in the project. Unlike ADK's pseudo-session
  `user`, a real conversation can never collide with that scope.
- Names must not contain `/` or `\\`; files are at most `settings.LANGHOST_ARTIFACT_MAX_BYTES`.
- Bytes go through Django's storage API (the `artifacts` storage alias, in the data dir by
  default) under a path derived from the scope and a hash of the name, one file per version,
  written before the row that names it; the rows keep version, MIME type, size and sha256.
  `open` hands out the stored file for streaming; `load` reads it whole.

These are sync functions (the API views and the message flow call them from Django's sync
side); wrap them with `sync_to_async` on the event loop.
"""

import hashlib
import os
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.core.files.base import ContentFile, File
from django.core.files.storage import storages
from django.db import IntegrityError, transaction
from django.db.models import Max

from ledger.models import Artifact

USER_PREFIX = "user:"
TEXT_MIME = "text/plain"
DEFAULT_MIME = "application/octet-stream"
SAVE_ATTEMPTS = 5


class ArtifactError(ValueError):
    """An invalid request: missing fields, a bad name, nothing to save."""


class ArtifactNotFound(LookupError):
    """The file (or that version of it) does not exist."""


class ArtifactTooLarge(ArtifactError):
    def __init__(self, name: str, size: int, limit: int):
        self.size, self.limit = size, limit
        super().__init__(
            f"Artifact '{name}' is {size} bytes, over the {limit}-byte limit "
            "(LANGHOST_ARTIFACT_MAX_BYTES)."
        )


@dataclass(frozen=True)
class ArtifactInfo:
    name: str
    version: int
    mime_type: str
    size: int
    sha256: str
    created_at: datetime
    custom_metadata: dict


@dataclass(frozen=True)
class LoadedArtifact:
    info: ArtifactInfo
    data: bytes


@dataclass(frozen=True)
class OpenedArtifact:
    info: ArtifactInfo
    file: File


def max_bytes() -> int:
    return int(getattr(settings, "LANGHOST_ARTIFACT_MAX_BYTES", 25 * 1024 * 1024))


def _storage():
    return storages["artifacts"]


def _write_durably(storage, name: str, data: bytes) -> str:
    """Save `data` and, on a local disk, fsync it and its directory entry; returns its path."""
    path = storage.save(name, ContentFile(data))
    try:
        local = Path(storage.path(path))
    except NotImplementedError:  # a remote storage: stored once its save returned
        return path
    try:
        for target in (local, local.parent):
            descriptor = os.open(target, os.O_RDONLY)
            try:
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
    except BaseException:
        storage.delete(path)
        raise
    return path


def _require(**fields) -> None:
    """Missing fields are named in order in one error."""
    missing = [key for key, value in fields.items() if not value]
    if missing:
        raise ArtifactError(f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} required.")
    name = fields.get("name")
    if name is not None and ("/" in name or "\\" in name):
        raise ArtifactError(f"Artifact name '{name}' must not contain '/' or '\\'.")


def conversation_file(name: str) -> str:
    """`name` for a file a runner makes in a conversation: never a `user:` name, which would
    put it among the user's files of every conversation."""
    return f"user_{name.removeprefix(USER_PREFIX)}" if name.startswith(USER_PREFIX) else name


def _scope(name: str, conversation_id: str) -> str:
    return "" if name.startswith(USER_PREFIX) else conversation_id


def _info(row: Artifact) -> ArtifactInfo:
    return ArtifactInfo(row.name, row.version, row.mime_type, row.size, row.sha256,
                        row.created_at, row.custom_metadata)


class ArtifactService:
    """Save, load, list, version and delete the artifacts of one project's conversations."""

    def _rows(self, project_id, user_id, conversation_id, name):
        _require(project_id=project_id, user_id=user_id, conversation_id=conversation_id,
                 name=name)
        return Artifact.objects.filter(project_id=project_id, user_id=user_id,
                                       conversation_id=_scope(name, conversation_id), name=name)

    def save(self, project_id: str, user_id: str, conversation_id: str, name: str, *,
             data: bytes | None = None, text: str | None = None, mime_type: str | None = None,
             custom_metadata: dict | None = None) -> int:
        """Store a new version (bytes, or text as UTF-8 `text/plain`); return its number."""
        _require(project_id=project_id, user_id=user_id, conversation_id=conversation_id,
                 name=name)
        if data is None and text is None:
            raise ArtifactError("An artifact needs text or data to save.")
        if data is None:
            data, mime_type = text.encode(), mime_type or TEXT_MIME
        limit = max_bytes()
        if len(data) > limit:
            raise ArtifactTooLarge(name, len(data), limit)
        scope = _scope(name, conversation_id)
        digest = hashlib.sha256(data).hexdigest()
        name_hash = hashlib.sha256(name.encode()).hexdigest()[:40]
        storage = _storage()
        # The bytes are on disk before the row that names them is committed, and no transaction
        # (SQLite: the database's one writer) stays open while they are written.
        path = _write_durably(
            storage, f"{project_id}/{user_id}/{scope or '_user'}/{name_hash}/{uuid.uuid4().hex}",
            data)
        try:
            for _attempt in range(SAVE_ATTEMPTS):
                try:
                    with transaction.atomic():
                        latest = Artifact.objects.filter(
                            project_id=project_id, user_id=user_id, conversation_id=scope,
                            name=name,
                        ).aggregate(m=Max("version"))["m"] or 0
                        Artifact.objects.create(
                            project_id=project_id, user_id=user_id, conversation_id=scope,
                            name=name, version=latest + 1, mime_type=mime_type or DEFAULT_MIME,
                            size=len(data), sha256=digest, storage_path=path,
                            custom_metadata=custom_metadata or {},
                        )
                    return latest + 1
                except IntegrityError:  # a concurrent save took this version: try the next one
                    continue
            raise ArtifactError(f"Could not save artifact '{name}': too many concurrent saves.")
        except BaseException:
            storage.delete(path)  # no row names these bytes
            raise

    def _row(self, project_id, user_id, conversation_id, name, version=None) -> Artifact:
        rows = self._rows(project_id, user_id, conversation_id, name)
        row = (rows.filter(version=version) if version else rows.order_by("-version")).first()
        if row is None:
            which = f"version {version} of " if version else ""
            raise ArtifactNotFound(f"Artifact {which}'{name}' does not exist.")
        return row

    def open(self, project_id: str, user_id: str, conversation_id: str, name: str,
             version: int | None = None) -> OpenedArtifact:
        """The latest version, or `version`, open for reading (the caller closes it);
        ArtifactNotFound when missing."""
        row = self._row(project_id, user_id, conversation_id, name, version)
        try:
            file = _storage().open(row.storage_path, "rb")
        except FileNotFoundError as exc:
            raise ArtifactNotFound(f"Artifact '{name}' version {row.version} does not exist "
                                   "in storage.") from exc
        return OpenedArtifact(_info(row), file)

    def load(self, project_id: str, user_id: str, conversation_id: str, name: str,
             version: int | None = None) -> LoadedArtifact:
        """The latest version, or `version`, read whole; ArtifactNotFound when missing."""
        opened = self.open(project_id, user_id, conversation_id, name, version)
        with opened.file as handle:
            return LoadedArtifact(opened.info, handle.read())

    def metadata(self, project_id: str, user_id: str, conversation_id: str, name: str,
                 version: int | None = None) -> ArtifactInfo:
        return _info(self._row(project_id, user_id, conversation_id, name, version))

    def versions(self, project_id: str, user_id: str, conversation_id: str,
                 name: str) -> list[int]:
        """Version numbers, newest first; ArtifactNotFound when the file has none."""
        numbers = list(self._rows(project_id, user_id, conversation_id, name)
                       .order_by("-version").values_list("version", flat=True))
        if not numbers:
            raise ArtifactNotFound(f"Artifact '{name}' does not exist.")
        return numbers

    def version_infos(self, project_id: str, user_id: str, conversation_id: str,
                      name: str) -> list[ArtifactInfo]:
        rows = list(self._rows(project_id, user_id, conversation_id, name).order_by("-version"))
        if not rows:
            raise ArtifactNotFound(f"Artifact '{name}' does not exist.")
        return [_info(row) for row in rows]

    def list_names(self, project_id: str, user_id: str, conversation_id: str) -> list[str]:
        """Names of the conversation's files and the user's, sorted."""
        _require(project_id=project_id, user_id=user_id, conversation_id=conversation_id)
        return sorted(set(
            Artifact.objects.filter(project_id=project_id, user_id=user_id,
                                    conversation_id__in=[conversation_id, ""])
            .values_list("name", flat=True)
        ))

    def latest_infos(self, project_id: str, user_id: str, conversation_id: str) -> list[ArtifactInfo]:
        """The latest version of each visible file, sorted by name."""
        _require(project_id=project_id, user_id=user_id, conversation_id=conversation_id)
        rows = Artifact.objects.filter(project_id=project_id, user_id=user_id,
                                       conversation_id__in=[conversation_id, ""])
        latest = {}
        for row in rows.order_by("name", "-version"):
            latest.setdefault(row.name, row)
        return [_info(latest[name]) for name in sorted(latest)]

    def delete(self, project_id: str, user_id: str, conversation_id: str, name: str,
               version: int | None = None) -> int:
        """Delete one version, or all; returns how many. Missing is not an error."""
        rows = self._rows(project_id, user_id, conversation_id, name)
        if version:
            rows = rows.filter(version=version)
        return _delete_rows(rows)

    def delete_conversation(self, project_id: str, user_id: str, conversation_id: str) -> int:
        """Every conversation-scoped file (the user's `user:` files stay)."""
        if not conversation_id:
            return 0
        return _delete_rows(Artifact.objects.filter(project_id=project_id, user_id=user_id,
                                                    conversation_id=conversation_id))


def _delete_rows(rows) -> int:
    storage = _storage()
    paths = list(rows.values_list("storage_path", flat=True))
    count, _ = rows.delete()
    for path in paths:
        storage.delete(path)
    return count


artifacts = ArtifactService()
