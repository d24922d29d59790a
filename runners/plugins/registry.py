"""Runner descriptors: stored from discovery, looked up by id for every run."""

import re
import time
from collections.abc import Collection

from asgiref.sync import sync_to_async
from django.db import transaction
from django.utils import timezone

from runners.models import PluginInstallation, RunnerDescriptor
from runners.plugins import command_registry

RUNNER_ID_RE = re.compile(r"^plugin:([^/\s]+)/([^/\s]+)/([^/\s]+)$")
# Descriptors are read for every run; a short-lived cache spares the run a round trip.
# Discovery in this process clears it; other processes' changes show within the TTL.
CACHE_SECONDS = 2.0
_cache: dict[str, tuple[float, RunnerDescriptor]] = {}
# The runners that run in LangHost's process, by id (`run`, label, capabilities): they register
# themselves when the app is ready (`runners.apps`), so the registry holds no runner's code.
BUILTINS: dict[str, dict] = {}


def register_builtins(specs: dict[str, dict]) -> None:
    BUILTINS.update(specs)


class RunnerNotFound(LookupError):
    def __init__(self, runner_id: str):
        self.runner_id = runner_id
        super().__init__(f"Runner '{runner_id}' is not available.")


def runner_availability(runner_id: str) -> bool | None:
    """Whether a runner is available now: None when no runner of that id is known at all."""
    if runner_id in BUILTINS:
        return True
    return RunnerDescriptor.objects.filter(id=runner_id).values_list("available", flat=True) \
        .first()


def runner_choices() -> list[tuple[str, str]]:
    """(id, label) of every known runner, the available ones first, for a choice list."""
    rows = RunnerDescriptor.objects.order_by("-available", "id").values_list("id", "available")
    known = [(runner_id, runner_id if available else f"{runner_id} (not available now)")
             for runner_id, available in rows]
    return [*((runner_id, runner_id) for runner_id in BUILTINS
              if runner_id not in dict(known)), *known]


def parse_plugin_runner_id(runner_id: str) -> tuple[str, str, str] | None:
    """`plugin:<author>/<plugin>/<runner>` → its three parts; anything else → None."""
    match = RUNNER_ID_RE.match(runner_id or "")
    return match.groups() if match else None


def _descriptor_fields(raw: dict) -> dict:
    manifest = raw.get("manifest") or {}
    return {
        "source": RunnerDescriptor.Source.PLUGIN,
        "label": manifest.get("label") or {},
        "description": manifest.get("description") or raw.get("runner_description") or {},
        "plugin_author": raw["plugin_author"],
        "plugin_name": raw["plugin_name"],
        "plugin_version": raw.get("plugin_version") or "",
        "runner_name": raw["runner_name"],
        "config_schema": raw.get("config") or manifest.get("config_schema") or [],
        "capabilities": raw.get("capabilities") or manifest.get("capabilities") or {},
        "permissions": raw.get("permissions") or manifest.get("permissions") or {},
        "usages": manifest.get("usages") or ["agent"],
        "supported_event_patterns": manifest.get("supported_event_patterns") or ["*"],
        "raw_manifest": manifest,
    }


def store_discovered_sync(raw_descriptors: list[dict],
                          listed_elsewhere: Collection[str] = ()) -> list[RunnerDescriptor]:
    """Upsert what the runtime listed; plugin runners it no longer lists become unavailable,
    unless another runtime worker lists them (`listed_elsewhere`).

    Runners of disabled plugins are stored unavailable: the pinned runtime ignores the
    `enabled` answer of plugin settings, so LangHost enforces it itself.
    """
    _cache.clear()
    now = timezone.now()
    # One transaction: readers never see a discovery half stored (some runners updated, the
    # ones it no longer lists still offered).
    with transaction.atomic():
        disabled = {(i.author, i.name) for i in PluginInstallation.objects.filter(enabled=False)}
        seen = []
        for raw in raw_descriptors:
            runner_id = f"plugin:{raw['plugin_author']}/{raw['plugin_name']}/{raw['runner_name']}"
            enabled = (raw["plugin_author"], raw["plugin_name"]) not in disabled
            RunnerDescriptor.objects.update_or_create(
                pk=runner_id,
                defaults={**_descriptor_fields(raw), "available": enabled, "last_seen_at": now},
            )
            if enabled:
                seen.append(runner_id)
        RunnerDescriptor.objects.filter(
            source=RunnerDescriptor.Source.PLUGIN, available=True
        ).exclude(pk__in=[*seen, *listed_elsewhere]).update(available=False, updated_at=now)
    return list(RunnerDescriptor.objects.filter(pk__in=seen))


def disable_plugin_runners_sync(author: str, name: str) -> int:
    """A plugin was disabled: its runners stop being offered at once."""
    _cache.clear()
    return RunnerDescriptor.objects.filter(plugin_author=author, plugin_name=name).update(
        available=False, updated_at=timezone.now())


def mark_plugins_unavailable_sync(listed_elsewhere: Collection[str] = ()) -> int:
    """The runtime is gone: none of its runners can run until it is back (but those another
    runtime worker lists)."""
    _cache.clear()
    return RunnerDescriptor.objects.filter(
        source=RunnerDescriptor.Source.PLUGIN, available=True
    ).exclude(pk__in=listed_elsewhere).update(available=False, updated_at=timezone.now())


def ensure_builtins_sync() -> None:
    """Store a descriptor for each built-in runner (after every `migrate`: runners/apps.py)."""
    now = timezone.now()
    with transaction.atomic():
        for runner_id, spec in BUILTINS.items():
            RunnerDescriptor.objects.update_or_create(
                pk=runner_id,
                defaults={
                    "source": RunnerDescriptor.Source.BUILTIN,
                    "runner_name": runner_id.split(":", 1)[1],
                    "label": spec["label"], "description": spec["description"],
                    "capabilities": spec["capabilities"], "permissions": spec["permissions"],
                    "usages": ["agent"], "supported_event_patterns": ["*"], "available": True,
                    "last_seen_at": now,
                },
            )


store_discovered = sync_to_async(store_discovered_sync)
mark_plugins_unavailable = sync_to_async(mark_plugins_unavailable_sync)


@sync_to_async
def _available(runner_id: str) -> RunnerDescriptor | None:
    return RunnerDescriptor.objects.filter(pk=runner_id, available=True).first()


def cached_descriptor(runner_id: str) -> RunnerDescriptor | None:
    cached = _cache.get(runner_id)
    if cached and cached[0] > time.monotonic():
        return cached[1]
    return None


async def get_descriptor(runner_id: str, rediscover) -> RunnerDescriptor:
    """The available descriptor; on a miss, `rediscover()` once before giving up."""
    if cached := cached_descriptor(runner_id):
        return cached
    if command_registry.is_command_id(runner_id):
        descriptor = await command_registry.available_runner(runner_id)
        if descriptor is None:
            raise RunnerNotFound(runner_id)
        return descriptor
    descriptor = await _available(runner_id)
    if descriptor is None and parse_plugin_runner_id(runner_id):
        await rediscover()
        descriptor = await _available(runner_id)
    if descriptor is None:
        raise RunnerNotFound(runner_id)
    _cache[runner_id] = (time.monotonic() + CACHE_SECONDS, descriptor)
    return descriptor
