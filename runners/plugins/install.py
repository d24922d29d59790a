"""Plugins installed from an upload and removed, as LangBot's "install local" does.

An upload is a LangBot plugin package (`.lbpkg`, a zip of the plugin folder with its
`manifest.yaml` at the root) or a zip of the folder itself. It is unpacked by the SDK's own
checked extraction (its limits on entries and sizes, no path out of the package), checked as
every plugin folder is (`folders.check`), and moved into the plugins dir as
`<author>__<name>` in one rename. The gateway's folder watch then has a fresh runtime load it,
installing its requirements into the plugin's own folder first (`requirements`), without
restarting LangHost.
"""

import importlib
import shutil
import uuid
import zipfile
from pathlib import Path

from django.conf import settings
from django.db import transaction

from runners.hostapi.host import installation_for_sync
from runners.models import PluginInstallation
from runners.plugins import events, folders
from runners.plugins.gateway import apply_plugin_settings, instance_id
from runners.plugins.registry import disable_plugin_runners_sync

# Unpacked here first: the folder watch and the scan skip names starting with a dot.
STAGING = ".incoming"


class PluginRefused(ValueError):
    """An upload that is not an installable plugin, with the reason."""


def plugins_dir() -> Path:
    return Path(settings.LANGHOST_PLUGINS_DIR)


def install_plugin(data: bytes, filename: str) -> PluginInstallation:
    """Install the plugin package `data`; its installation row (enabled). Raises PluginRefused
    naming what is wrong: not a zip, a path out of the package, over the SDK's limits, a
    folder the runtime could not load, or a plugin of that name already installed."""
    if settings.LANGHOST_RUNTIME_URL:
        raise PluginRefused("This LangHost uses a runtime it does not start "
                            "(LANGHOST_RUNTIME_URL): install plugins on that runtime.")
    staging = plugins_dir() / STAGING / uuid.uuid4().hex
    staging.mkdir(parents=True)
    try:
        try:
            _artifacts().PluginArtifactStore._extract_verified_zip(data, staging)
        except zipfile.BadZipFile:
            raise PluginRefused(f"{filename} is not a zip or .lbpkg package.") from None
        except ValueError as exc:
            raise PluginRefused(str(exc)) from None
        folder = folders.check(_package_root(staging))
        if folder.problem:
            raise PluginRefused(folder.problem.replace("Quarantined, not loaded: ",
                                                       "Not installed: "))
        target = plugins_dir() / f"{folder.author}__{folder.name}"
        if target.exists() or _installed(folder.author, folder.name):
            raise PluginRefused(f"A plugin {folder.plugin_id} is installed already: delete it "
                                f"first to install another version.")
        folder.path.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return installation_for_sync(instance_id(), folder.author, folder.name,
                                 folder.version)


def _artifacts():
    """The SDK's package store, loaded on first use: the web process that never installs a
    plugin does not carry the SDK's runtime."""
    return importlib.import_module("langbot_plugin.runtime.plugin.artifact")


def _package_root(unpacked: Path) -> Path:
    """The plugin folder of an unpacked upload: its root, or the one folder it holds (a zip
    of the folder rather than of its contents)."""
    if (unpacked / "manifest.yaml").exists():
        return unpacked
    entries = [entry for entry in unpacked.iterdir() if entry.name != "__MACOSX"]
    if len(entries) == 1 and entries[0].is_dir() and (entries[0] / "manifest.yaml").exists():
        return entries[0]
    raise PluginRefused("The package has no manifest.yaml at its root (nor in a single "
                        "folder at its root).")


def _installed(author: str, name: str) -> bool:
    return any(folder.author == author and folder.name == name
               for folder in folders.scan(plugins_dir()))


@transaction.atomic
def delete_plugin(installation: PluginInstallation) -> None:
    """Remove the plugin's folder (its requirements with it) and its installation; its runners
    are withdrawn now, the runtime lets the plugin go at its next folder check."""
    disable_plugin_runners_sync(installation.author, installation.name)
    for folder in folders.scan(plugins_dir()):
        if (folder.author, folder.name) == (installation.author, installation.name):
            # Out of the plugins dir in one rename, then removed at leisure.
            doomed = plugins_dir() / STAGING / f"deleted-{uuid.uuid4().hex}"
            doomed.parent.mkdir(parents=True, exist_ok=True)
            folder.path.rename(doomed)
            shutil.rmtree(doomed, ignore_errors=True)
    installation.delete()


def set_enabled(installation: PluginInstallation, enabled: bool) -> None:
    """Enable or disable a plugin: a disabled one's runners stop being offered at once; the
    runtime restarts the plugin with its settings in the background."""
    installation.enabled = enabled
    installation.save(update_fields=["enabled", "updated_at"])
    settings_changed(installation)


def settings_changed(installation: PluginInstallation) -> None:
    """The installation's settings (enabled, config, priority) changed: the runtime restarts
    the plugin with them, in the background."""
    events.forget_listening_plugins()
    if not installation.enabled:
        disable_plugin_runners_sync(installation.author, installation.name)
    apply_plugin_settings(installation.author, installation.name)
