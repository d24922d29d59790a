"""Tool descriptors: the plugins' `Tool` components, stored from discovery."""

from collections.abc import Collection

from asgiref.sync import sync_to_async
from django.db import transaction
from django.utils import timezone

from runners.models import PluginInstallation, ToolDescriptor


def tool_id(author: str, plugin: str, name: str) -> str:
    return f"plugin:{author}/{plugin}/{name}"


def _tool_fields(raw: dict) -> dict:
    """One `list_tools` entry (a component manifest, `owner` = "author/name") as row fields."""
    manifest = raw.get("manifest") or {}
    metadata = manifest.get("metadata") or {}
    spec = manifest.get("spec") or {}
    author, plugin = raw["owner"].split("/", 1)
    description = metadata.get("description") or {}
    return {
        "name": metadata["name"],
        "plugin_author": author,
        "plugin_name": plugin,
        "label": metadata.get("label") or {},
        # What a model is told about the tool: its prompt, else its description.
        "description": spec.get("llm_prompt") or description.get("en_US") or "",
        "parameters": spec.get("parameters") or {},
        "raw_manifest": manifest,
    }


def store_discovered_tools_sync(raw_tools: list[dict],
                                plugins_elsewhere: Collection[str] = ()) -> list[ToolDescriptor]:
    """Upsert what the runtime listed; tools it no longer lists become unavailable, unless
    another runtime worker has their plugin (`plugins_elsewhere`, `author/name` ids).

    Tools of disabled plugins are stored unavailable, as their runners are.
    """
    now = timezone.now()
    with transaction.atomic():
        disabled = {(i.author, i.name) for i in PluginInstallation.objects.filter(enabled=False)}
        seen = []
        for raw in raw_tools:
            fields = _tool_fields(raw)
            pk = tool_id(fields["plugin_author"], fields["plugin_name"], fields["name"])
            enabled = (fields["plugin_author"], fields["plugin_name"]) not in disabled
            ToolDescriptor.objects.update_or_create(
                pk=pk, defaults={**fields, "available": enabled, "last_seen_at": now})
            if enabled:
                seen.append(pk)
        excluding_plugins(ToolDescriptor.objects.filter(available=True).exclude(pk__in=seen),
                          plugins_elsewhere).update(available=False, updated_at=now)
    return list(ToolDescriptor.objects.filter(pk__in=seen))


def mark_tools_unavailable_sync(plugins_elsewhere: Collection[str] = ()) -> int:
    """The runtime is gone: none of its tools can be called until it is back (but those of
    plugins another runtime worker has)."""
    listed = excluding_plugins(ToolDescriptor.objects.filter(available=True), plugins_elsewhere)
    return listed.update(available=False, updated_at=timezone.now())


def excluding_plugins(components, plugin_ids: Collection[str]):
    """`components` (tools, commands) but those of the plugins named (`author/name`)."""
    for plugin_id in plugin_ids:
        author, name = plugin_id.split("/", 1)
        components = components.exclude(plugin_author=author, plugin_name=name)
    return components


store_discovered_tools = sync_to_async(store_discovered_tools_sync)
mark_tools_unavailable = sync_to_async(mark_tools_unavailable_sync)
