"""Installing and removing skills, through the SDK's skill store (`langbot_plugin.skill_store`,
under the data dir's `skills/`): an upload is a zip of one or more packages, each a directory
with a `SKILL.md` (front matter `name` and `description`, then the instructions) and its
files. The store checks the upload against its own limits (size, entries, compression, each
file's size) and refuses a path that leads out of the package; the refusal, in its words, is
a SkillError. Installing a skill of a name already installed replaces it (a new revision).
"""

import os
from pathlib import Path

from django.conf import settings
from django.db import transaction
from langbot_plugin.skill_store import SkillStore

from runners.skills.models import Skill

NAMESPACE = "langhost"
MAX_LISTED_FILES = 200


class SkillError(ValueError):
    pass


def store() -> SkillStore:
    return SkillStore(Path(settings.DATA_DIR) / "skills").scoped(NAMESPACE)


def preview(data: bytes, filename: str) -> list[dict]:
    """The packages an upload holds, as they would install: name, description, instructions."""
    try:
        found = store().preview_zip_upload(file_bytes=data, filename=filename)
    except (ValueError, OSError) as exc:
        raise SkillError(str(exc)) from None
    return [{key: item.get(key) for key in ("name", "display_name", "description",
                                            "instructions")} for item in found]


@transaction.atomic
def install(data: bytes, filename: str) -> list[Skill]:
    """Install the upload's packages; their rows, made or brought up to date."""
    skills = store()
    try:
        for item in preview(data, filename):
            if skills.get_skill(item["name"]) is not None:
                skills.delete_skill(item["name"])  # replaced by the new revision
        installed = skills.install_zip_upload(file_bytes=data, filename=filename)
    except (ValueError, OSError) as exc:
        raise SkillError(str(exc)) from None
    rows = []
    for item in installed:
        skill, _ = Skill.objects.update_or_create(name=item["name"], defaults={
            "display_name": item.get("display_name") or "",
            "description": item.get("description") or "",
            "instructions": item.get("instructions") or "",
            "revision": item.get("revision") or "",
            "files": _files(item["package_root"])})
        rows.append(skill)
    return rows


def _files(package_root: str) -> list[str]:
    found = []
    for directory, _, names in os.walk(package_root):
        for name in sorted(names):
            found.append(os.path.relpath(os.path.join(directory, name), package_root))
            if len(found) >= MAX_LISTED_FILES:
                return found
    return sorted(found)


@transaction.atomic
def delete(skill: Skill) -> None:
    skills = store()
    if skills.get_skill(skill.name) is not None:
        skills.delete_skill(skill.name)
    skill.delete()


def package_root(name: str) -> Path:
    """Where the installed skill's files are (to copy them into a box workspace)."""
    try:
        return Path(store().resolve_skill_package_root(name))
    except ValueError as exc:
        raise SkillError(str(exc)) from None
