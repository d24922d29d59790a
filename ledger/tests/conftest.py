import pytest


@pytest.fixture(autouse=True)
def artifact_storage(settings, tmp_path):
    """Artifacts of a test go to its own temp dir, never the real data dir."""
    settings.STORAGES = {
        **settings.STORAGES,
        "artifacts": {"BACKEND": "django.core.files.storage.FileSystemStorage",
                      "OPTIONS": {"location": str(tmp_path / "artifacts")}},
    }
    return tmp_path / "artifacts"
