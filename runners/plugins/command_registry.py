"""Command descriptors: the plugins' `Command` components, stored from discovery.

A message that starts with its agent type's command prefix and a command's name runs the
command instead of the agent's runner (LangBot's `!name sub args`). For the engine a command
is a runner of its own, `command:<author>/<plugin>/<name>` (`as_runner`), whose results are
the command's replies; it is granted nothing a run may use (no state, models or tools).
"""

from collections.abc import Collection

from asgiref.sync import sync_to_async
from django.db import transaction
from django.utils import timezone

from runners.models import CommandDescriptor, PluginInstallation, RunnerDescriptor
from runners.plugins.tool_registry import excluding_plugins

ID_PREFIX = "command:"


def command_id(author: str, plugin: str, name: str) -> str:
    return f"{ID_PREFIX}{author}/{plugin}/{name}"


def is_command_id(runner_id: str) -> bool:
    return runner_id.startswith(ID_PREFIX)


def _command_fields(raw: dict) -> dict:
    """One `list_commands` entry (a component manifest, `owner` = "author/name")."""
    manifest = raw.get("manifest") or {}
    metadata = manifest.get("metadata") or {}
    author, plugin = raw["owner"].split("/", 1)
    return {
        "name": metadata["name"],
        "plugin_author": author,
        "plugin_name": plugin,
        "label": metadata.get("label") or {},
        "description": metadata.get("description") or {},
        "raw_manifest": manifest,
    }


def store_discovered_commands_sync(raw_commands: list[dict],
                                   plugins_elsewhere: Collection[str] = ()) -> None:
    """Upsert what the runtime listed; commands it no longer lists become unavailable, unless
    another runtime worker has their plugin (`plugins_elsewhere`, `author/name` ids)."""
    now = timezone.now()
    with transaction.atomic():
        seen = []
        for raw in raw_commands:
            fields = _command_fields(raw)
            pk = command_id(fields["plugin_author"], fields["plugin_name"], fields["name"])
            CommandDescriptor.objects.update_or_create(
                pk=pk, defaults={**fields, "available": True, "last_seen_at": now})
            seen.append(pk)
        excluding_plugins(CommandDescriptor.objects.filter(available=True).exclude(pk__in=seen),
                          plugins_elsewhere).update(available=False, updated_at=now)


def mark_commands_unavailable_sync(plugins_elsewhere: Collection[str] = ()) -> int:
    """The runtime is gone: none of its commands run until it is back."""
    listed = excluding_plugins(CommandDescriptor.objects.filter(available=True), plugins_elsewhere)
    return listed.update(available=False, updated_at=timezone.now())


def _enabled(commands):
    return excluding_plugins(commands, [installation.plugin_id for installation in
                                        PluginInstallation.objects.filter(enabled=False)])


def find_sync(name: str) -> CommandDescriptor | None:
    """The available command of that name, of an enabled plugin (the first by id when two
    plugins declare one, as the runtime runs the first it finds)."""
    return _enabled(CommandDescriptor.objects.filter(name=name, available=True)).first()


def as_runner(command: CommandDescriptor) -> RunnerDescriptor:
    """The command as the engine runs it: a runner descriptor of its own (not stored)."""
    return RunnerDescriptor(
        id=command.pk, source=RunnerDescriptor.Source.COMMAND, label=command.label,
        description=command.description, plugin_author=command.plugin_author,
        plugin_name=command.plugin_name, runner_name=command.name, usages=["agent"],
        supported_event_patterns=[], raw_manifest=command.raw_manifest, available=True)


def find_by_id_sync(command_id_: str) -> CommandDescriptor | None:
    """The command of that id, if it is available and its plugin enabled."""
    return _enabled(CommandDescriptor.objects.filter(pk=command_id_, available=True)).first()


@sync_to_async
def available_runner(runner_id: str) -> RunnerDescriptor | None:
    command = find_by_id_sync(runner_id)
    return as_runner(command) if command else None


store_discovered_commands = sync_to_async(store_discovered_commands_sync)
mark_commands_unavailable = sync_to_async(mark_commands_unavailable_sync)
