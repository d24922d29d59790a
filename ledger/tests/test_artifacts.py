"""The artifact service per agent-tree-semantics.md section 9 (A1-A9), on the real storage."""

import hashlib

import pytest

from ledger.models import Artifact
from ledger.services.artifacts import (
    ArtifactError,
    ArtifactNotFound,
    ArtifactService,
    ArtifactTooLarge,
)

pytestmark = [pytest.mark.django_db, pytest.mark.backend]

SESSION = ("project-1", "user-1", "conv-1")
OTHER_SESSION = ("project-1", "user-1", "conv-2")


@pytest.fixture
def service():
    return ArtifactService()


def fill(service, names=("file1", "file2", "file3")):
    """A1's saves: file1 x3, then file2 and file3 (text parts)."""
    file1, file2, file3 = names
    versions = [service.save(*SESSION, file1, text=f"file1 v{n}") for n in (1, 2, 3)]
    versions.append(service.save(*SESSION, file2, text="file2 v1"))
    versions.append(service.save(*SESSION, file3, text="file3 v1"))
    return versions


def test_a1_versions_start_at_one_and_count_up(service):
    assert fill(service) == [1, 2, 3, 1, 1]


def test_a2_load_latest_and_given_versions(service):
    fill(service)

    assert service.load(*SESSION, "file1").data == b"file1 v3"
    assert service.load(*SESSION, "file1", 1).data == b"file1 v1"
    assert service.load(*SESSION, "file1", 2).data == b"file1 v2"


def test_a3_list_is_sorted_and_versions_are_newest_first(service):
    fill(service)

    assert service.list_names(*SESSION) == ["file1", "file2", "file3"]
    assert service.versions(*SESSION, "file1") == [3, 2, 1]


def test_a4_deleting_the_latest_version_makes_the_previous_one_latest(service):
    fill(service)

    service.delete(*SESSION, "file1", 3)

    assert service.load(*SESSION, "file1").data == b"file1 v2"
    assert service.versions(*SESSION, "file1") == [2, 1]


def test_a5_deleting_all_versions_removes_the_file_and_its_bytes(service, artifact_storage):
    fill(service)

    service.delete(*SESSION, "file1")

    with pytest.raises(ArtifactNotFound):
        service.load(*SESSION, "file1")
    with pytest.raises(ArtifactNotFound):
        service.versions(*SESSION, "file1")
    assert service.list_names(*SESSION) == ["file2", "file3"]
    stored = [p for p in artifact_storage.rglob("*") if p.is_file()]
    assert len(stored) == Artifact.objects.count() == 2


def test_a6_user_scoped_names_behave_the_same_through_another_conversation(service):
    fill(service, names=("user:file1", "file2", "user:file3"))

    assert service.load(*OTHER_SESSION, "user:file1").data == b"file1 v3"
    assert service.load(*OTHER_SESSION, "user:file1", 1).data == b"file1 v1"
    assert service.versions(*OTHER_SESSION, "user:file1") == [3, 2, 1]
    service.delete(*OTHER_SESSION, "user:file1", 3)
    assert service.load(*SESSION, "user:file1").data == b"file1 v2"
    assert service.list_names(*SESSION) == ["file2", "user:file1", "user:file3"]
    assert service.list_names(*OTHER_SESSION) == ["user:file1", "user:file3"]
    service.delete(*OTHER_SESSION, "user:file1")
    assert service.list_names(*SESSION) == ["file2", "user:file3"]


def test_user_scoped_names_are_not_shared_with_another_user(service):
    service.save(*SESSION, "user:prefs", text="mine")

    assert service.list_names("project-1", "user-2", "conv-1") == []


def test_a7_empty_store_says_not_found_lists_nothing_and_deletes_quietly(service):
    for call in (lambda: service.load(*SESSION, "file1"),
                 lambda: service.versions(*SESSION, "file1"),
                 lambda: service.metadata(*SESSION, "file1")):
        with pytest.raises(ArtifactNotFound, match="does not exist"):
            call()
    assert service.list_names(*SESSION) == []
    assert service.delete(*SESSION, "file1") == 0


def test_a8_metadata_of_latest_given_and_missing_versions(service):
    fill(service)

    latest = service.metadata(*SESSION, "file1")
    second = service.metadata(*SESSION, "file1", 2)

    assert (latest.version, latest.mime_type) == (3, "text/plain")
    assert (second.version, second.size) == (2, len(b"file1 v2"))
    assert second.sha256 == hashlib.sha256(b"file1 v2").hexdigest()
    assert second.created_at is not None
    with pytest.raises(ArtifactNotFound):
        service.metadata(*SESSION, "file1", 99)
    with pytest.raises(ArtifactNotFound):
        service.metadata(*SESSION, "nofile")


def test_a8_mime_type_of_bytes_is_kept(service):
    service.save(*SESSION, "photo", data=b"\x89PNG", mime_type="image/png")

    assert service.metadata(*SESSION, "photo").mime_type == "image/png"


def test_a9_missing_fields_are_named_in_order(service):
    with pytest.raises(ArtifactError, match="^project_id, conversation_id, name are required"):
        service.save("", "user-1", "", "", text="x")
    with pytest.raises(ArtifactError, match="^user_id is required"):
        service.list_names("project-1", "", "conv-1")


@pytest.mark.parametrize("name", ["a/b", "a\\b"])
def test_a9_names_with_slashes_are_rejected(service, name):
    with pytest.raises(ArtifactError, match="must not contain"):
        service.save(*SESSION, name, text="x")
    with pytest.raises(ArtifactError, match="must not contain"):
        service.load(*SESSION, name)


def test_a9_a_save_needs_text_or_data(service):
    with pytest.raises(ArtifactError, match="needs text or data"):
        service.save(*SESSION, "empty")
    assert not Artifact.objects.exists()


def test_size_limit_comes_from_settings(service, settings):
    settings.LANGHOST_ARTIFACT_MAX_BYTES = 8

    with pytest.raises(ArtifactTooLarge, match="9 bytes, over the 8-byte limit"):
        service.save(*SESSION, "big", data=b"123456789")
    assert service.save(*SESSION, "small", data=b"12345678") == 1


def stored_files(root) -> list:
    return [path for path in root.rglob("*") if path.is_file()]


@pytest.mark.django_db(transaction=True)
def test_the_bytes_are_written_and_synced_before_the_transaction_that_adds_the_row(
        service, monkeypatch):
    from django.db import connection

    from ledger.services import artifacts as module

    seen = []
    real_write = module._write_durably
    real_fsync = module.os.fsync

    def write_durably(*args):
        seen.append(("write", connection.in_atomic_block))
        return real_write(*args)

    def fsync(descriptor):
        seen.append(("fsync", connection.in_atomic_block))
        real_fsync(descriptor)

    monkeypatch.setattr(module, "_write_durably", write_durably)
    monkeypatch.setattr(module.os, "fsync", fsync)

    service.save(*SESSION, "notes", text="kept")

    assert seen == [("write", False), ("fsync", False), ("fsync", False)]  # the file, its dir
    assert service.load(*SESSION, "notes").data == b"kept"


def test_a_failed_row_insert_removes_the_written_file(service, artifact_storage, monkeypatch):
    service.save(*SESSION, "notes", text="v1")

    def refuse(**fields):
        raise RuntimeError("database went away")

    monkeypatch.setattr(Artifact.objects, "create", refuse)
    with pytest.raises(RuntimeError, match="went away"):
        service.save(*SESSION, "notes", text="v2")

    assert len(stored_files(artifact_storage)) == Artifact.objects.count() == 1


def test_open_hands_out_the_stored_file_to_read_in_blocks(service):
    service.save(*SESSION, "big", data=b"0123456789")

    opened = service.open(*SESSION, "big")
    with opened.file as handle:
        blocks = list(iter(lambda: handle.read(4), b""))

    assert (opened.info.version, opened.info.size) == (1, 10)
    assert blocks == [b"0123", b"4567", b"89"]
    with pytest.raises(ArtifactNotFound):
        service.open(*SESSION, "big", 2)
