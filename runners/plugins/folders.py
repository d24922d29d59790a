"""Plugin folders, checked before the runtime sees them.

A folder goes to the runtime only when its `manifest.yaml` is a mapping that names the plugin
(`metadata.author`, `metadata.name`), its Python entry exists and compiles, and every component
directory it lists exists. Any other folder is quarantined: the runtime never sees it (the SDK's
runtime does not even start with some malformed manifests, which would stop every plugin), and
its reason is shown on its installation. A folder whose manifest names no plugin is known by its
folder name, `<author>__<name>`.
"""

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import yaml

# A plugin's author and name make its folder's name, `<author>__<name>`: one path segment.
PLUGIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
# The most of a plugin's manifest, and of its Python entry, read to check them.
MAX_FILE_BYTES = 1024 * 1024


@dataclass(frozen=True)
class PluginFolder:
    path: Path
    author: str
    name: str
    version: str = ""
    problem: str = ""  # why the folder is quarantined; empty when the runtime may load it

    @property
    def plugin_id(self) -> str:
        return f"{self.author}/{self.name}"


def scan(plugins_dir: Path) -> list[PluginFolder]:
    """Every plugin folder of `plugins_dir`, checked, in name order."""
    if not plugins_dir.exists():
        return []
    return [check(path) for path in sorted(plugins_dir.iterdir())
            if path.is_dir() and not path.name.startswith((".", "_"))]


def config_schema(plugins_dir: Path, author: str, name: str) -> list:
    """The config fields a plugin's manifest declares (`spec.config`); [] when its folder or
    manifest cannot be read."""
    try:
        manifest = yaml.safe_load(_file_inside(Path(plugins_dir) / f"{author}__{name}",
                                               "manifest.yaml"))
    except (OSError, yaml.YAMLError):
        return []
    spec = manifest.get("spec") if isinstance(manifest, dict) else None
    fields = spec.get("config") if isinstance(spec, dict) else None
    return [field for field in fields if isinstance(field, dict)] if isinstance(fields, list) \
        else []


def check(path: Path) -> PluginFolder:
    author, _, name = path.name.partition("__")
    named = PluginFolder(path, author if name else "", name or path.name)
    try:
        manifest = yaml.safe_load(_file_inside(path, "manifest.yaml"))
    except OSError:
        return _quarantined(named, "it has no readable manifest.yaml (a file inside its folder)")
    except OversizedFile as exc:
        return _quarantined(named, str(exc))
    except yaml.YAMLError as exc:
        return _quarantined(named, f"manifest.yaml is not valid YAML: {_first_line(exc)}")
    if not isinstance(manifest, dict):
        return _quarantined(named, f"manifest.yaml must be a mapping, not "
                                   f"{type(manifest).__name__}")
    metadata = manifest.get("metadata")
    if not isinstance(metadata, dict):
        return _quarantined(named, "manifest.yaml: `metadata` must be a mapping with `author` "
                                   "and `name`")
    author, name = metadata.get("author"), metadata.get("name")
    if not (isinstance(author, str) and author and isinstance(name, str) and name):
        return _quarantined(named, "manifest.yaml: `metadata.author` and `metadata.name` must "
                                   "be non-empty strings")
    if not (PLUGIN_NAME.fullmatch(author) and PLUGIN_NAME.fullmatch(name)) or "__" in author:
        return _quarantined(named, "manifest.yaml: `metadata.author` and `metadata.name` may "
                                   "hold letters, digits, '-', '_' and '.' (the author no "
                                   "'__'), starting with a letter or digit")
    folder = PluginFolder(path, author, name, str(metadata.get("version") or ""))
    problem = _entry_problem(path, manifest) or _components_problem(path, manifest)
    return _quarantined(folder, problem) if problem else folder


def _quarantined(folder: PluginFolder, problem: str) -> PluginFolder:
    return PluginFolder(folder.path, folder.author, folder.name, folder.version,
                        f"Quarantined, not loaded: {problem}.")


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _entry_problem(path: Path, manifest: dict) -> str:
    python = ((manifest.get("execution") or {}) if isinstance(manifest.get("execution"), dict)
              else {}).get("python")
    entry = python.get("path") if isinstance(python, dict) else None
    if not isinstance(entry, str) or not entry:
        return "manifest.yaml: `execution.python.path` must name the plugin's Python entry"
    try:
        compile(_file_inside(path, entry), str(path / entry), "exec")
    except OSError:
        return f"its Python entry {entry} is missing (a file inside the plugin's folder)"
    except OversizedFile as exc:
        return f"its Python entry {exc}"
    except (SyntaxError, ValueError) as exc:
        return f"its Python entry {entry} does not compile: {_first_line(exc)}"
    return ""


def _components_problem(path: Path, manifest: dict) -> str:
    spec = manifest.get("spec")
    components = spec.get("components") if isinstance(spec, dict) else None
    if components is None:
        return ""
    if not isinstance(components, dict):
        return "manifest.yaml: `spec.components` must be a mapping"
    for kind, found in components.items():
        dirs = found.get("fromDirs") if isinstance(found, dict) else None
        if not isinstance(dirs, list):
            return f"manifest.yaml: `spec.components.{kind}.fromDirs` must be a list"
        for item in dirs:
            where = item.get("path") if isinstance(item, dict) else None
            if not isinstance(where, str) or not _inside(path, path / where) \
                    or not (path / where).is_dir():
                return f"the {kind} components directory {where!r} is missing"
    return ""


class OversizedFile(Exception):
    pass


def _file_inside(folder: Path, relative: str) -> bytes:
    """The bytes of `relative`, a regular file inside `folder` (its links followed); OSError
    when it is none, OversizedFile past MAX_FILE_BYTES."""
    path = folder / relative
    if not _inside(folder, path) or not path.is_file():
        raise FileNotFoundError(relative)
    with path.open("rb") as opened:
        data = opened.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise OversizedFile(f"{relative} is over {MAX_FILE_BYTES} bytes")
    return data


def _inside(folder: Path, path: Path) -> bool:
    """Whether `path`, its links followed, is in `folder`."""
    return path.resolve().is_relative_to(folder.resolve())


def signature(plugins_dir: Path) -> tuple:
    """What changes when a plugin folder is added, removed or edited (its manifest or entry)."""
    if not plugins_dir.exists():
        return ()
    return tuple((path.name, *(_mtime(path / name) for name in ("manifest.yaml", "main.py")))
                 for path in sorted(plugins_dir.iterdir())
                 if path.is_dir() and not path.name.startswith((".", "_")))  # as `scan`


def _mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


def link_into_runtime_dir(runtime_dir: Path, folders: list[Path]) -> None:
    """The runtime loads every folder of `./data/plugins/` in its cwd: link exactly these."""
    target = runtime_dir / "data" / "plugins"
    if target.is_symlink():  # the whole plugins dir, as LangHost used to link it
        target.unlink()
    elif target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for folder in folders:
        (target / folder.name).symlink_to(folder.resolve(), target_is_directory=True)
