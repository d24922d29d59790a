"""What LangHost answers when the plugin runtime calls the host: plugin settings from
`PluginInstallation`, binary storage in `PluginStorage`, the in-run APIs and LangBot's model,
tool, knowledge and vector actions, and knowledge files."""

import asyncio
import base64
from collections.abc import AsyncIterator

from asgiref.sync import sync_to_async
from django.db import IntegrityError, transaction

from runners.catalogue import runner_config
from runners.hostapi import (
    box_api,
    knowledge_api,
    model_api,
    query_api,
    run_api,
    tool_api,
    vector_api,
)
from runners.models import PluginInstallation, PluginStorage
from runners.observability import tracing
from runners.runtime.host_actions import HostActions, HostError
from runners.runtime.host_process import host_process
from runners.runtime.identity import plugin_installation_uuid


def installation_for_sync(instance_id: str, author: str, name: str, version: str = "") -> PluginInstallation:
    """The installation row of a plugin folder, created (enabled) the first time it is seen."""
    # Asked on every plugin launch and discovery: read first, so the common case takes no write
    # lock (transactions BEGIN IMMEDIATE on SQLite).
    installation = PluginInstallation.objects.filter(author=author, name=name).first()
    if installation is not None and (not version or installation.version == version):
        return installation
    try:
        with transaction.atomic():
            installation, created = PluginInstallation.objects.get_or_create(
                author=author, name=name,
                defaults={"version": version,
                          "installation_uuid": plugin_installation_uuid(instance_id, author, name)},
            )
    except IntegrityError:  # created concurrently
        installation, created = PluginInstallation.objects.get(author=author, name=name), False
    if not created and version and installation.version != version:
        installation.version = version
        installation.save(update_fields=["version", "updated_at"])
    return installation


class DjangoHost(HostActions):
    def __init__(self, instance_id: str, database_ready: asyncio.Event | None = None):
        self.instance_id = instance_id
        # Set once the database is migrated: `manage.py serve` starts the runtime while it
        # migrates, and a plugin asks for its settings as soon as it starts.
        self.database_ready = database_ready

    async def _migrated(self) -> None:
        if self.database_ready is not None:
            await self.database_ready.wait()

    async def get_plugin_settings(self, plugin_author: str, plugin_name: str) -> dict:
        await self._migrated()
        installation = await sync_to_async(installation_for_sync)(
            self.instance_id, plugin_author, plugin_name
        )
        return {
            "enabled": installation.enabled,
            "priority": installation.priority,
            "plugin_config": runner_config.opened(installation.config or {}),
            "installation_uuid": installation.installation_uuid,
            "install_source": "local",
            "install_info": {},
        }

    async def initialize_plugin_settings(self, data: dict) -> None:
        await self._migrated()
        await sync_to_async(installation_for_sync)(
            self.instance_id, data.get("plugin_author", ""), data.get("plugin_name", "")
        )

    async def get_binary_storage(self, owner_type: str, owner: str, key: str) -> bytes:
        row = await PluginStorage.objects.filter(owner_type=owner_type, owner=owner, key=key).afirst()
        if row is None:
            raise HostError("storage.not_found", f"no {owner_type} storage key {key!r}")
        return bytes(row.value)

    async def set_binary_storage(self, owner_type: str, owner: str, key: str, value: bytes) -> None:
        await PluginStorage.objects.aupdate_or_create(
            owner_type=owner_type, owner=owner, key=key, defaults={"value": value}
        )

    async def get_binary_storage_keys(self, owner_type: str, owner: str) -> list[str]:
        rows = PluginStorage.objects.filter(owner_type=owner_type, owner=owner).order_by("key")
        return [key async for key in rows.values_list("key", flat=True)]

    async def delete_binary_storage(self, owner_type: str, owner: str, key: str) -> None:
        await PluginStorage.objects.filter(owner_type=owner_type, owner=owner, key=key).adelete()

    async def get_config_file(self, data: dict) -> dict:
        """Config files are uploads a plugin's config form refers to, kept in plugin storage."""
        key = data.get("file_key") or ""
        row = await PluginStorage.objects.filter(owner_type="config_file", key=key).afirst()
        if row is None:
            raise HostError("config_file.not_found", f"no config file {key!r}")
        return {"file_base64": base64.b64encode(bytes(row.value)).decode()}

    async def handle_run_api(self, action: str, data: dict, context: dict | None) -> dict:
        await _run_written(data)
        with tracing.host_action(action, data.get("run_id")):
            return await self._answer(action, data, context)

    async def _answer(self, action: str, data: dict, context: dict | None) -> dict:
        if action in model_api.ACTIONS:
            return await model_api.handle(action, data, context)
        if action in tool_api.ACTIONS:
            return await tool_api.handle(action, data, context)
        if action in knowledge_api.ACTIONS:
            return await knowledge_api.handle(action, data, context)
        if action in vector_api.ACTIONS:
            return await vector_api.handle(action, data, context)
        if action in box_api.ACTIONS:
            return await box_api.handle(action, data, context)
        if action in query_api.ACTIONS:
            return await query_api.handle(action, data, context)
        return await run_api.handle(action, data, context)

    async def read_file(self, action: str, data: dict, context: dict | None) -> tuple[bytes, str]:
        await _run_written(data)
        return await knowledge_api.document_file(action, data, context)

    async def stream_run_api(self, action: str, data: dict,
                             context: dict | None) -> AsyncIterator[dict]:
        await _run_written(data)
        async for item in model_api.stream(action, data, context):
            yield item


async def _run_written(data: dict) -> None:
    """Every in-run API reads its run's row: a run that kept it back writes it first."""
    if data.get("run_id"):
        await host_process().written(str(data["run_id"]))
