"""A plugin folder is read within itself: a manifest or entry that is a link out of the folder,
or no regular file, quarantines the folder without being read."""

import shutil

from runners.plugins import folders
from runners.tests.conftest import FIXTURE_PLUGINS


def qa_copy(tmp_path):
    path = tmp_path / "e2e__agent-runner-qa"
    shutil.copytree(FIXTURE_PLUGINS / "e2e__agent-runner-qa", path)
    return path


def test_a_manifest_linked_from_outside_the_folder_is_not_read(tmp_path):
    folder = qa_copy(tmp_path)
    outside = tmp_path / "elsewhere.yaml"
    (folder / "manifest.yaml").rename(outside)
    (folder / "manifest.yaml").symlink_to(outside)

    assert "no readable manifest.yaml" in folders.check(folder).problem


def test_an_entry_that_is_a_device_is_not_read(tmp_path):
    folder = qa_copy(tmp_path)
    (folder / "main.py").unlink()
    (folder / "main.py").symlink_to("/dev/zero")

    assert "Python entry main.py is missing" in folders.check(folder).problem
