"""Stable ids LangHost presents to the SDK runtime.

The runtime pins itself to the first identity and binding it sees
("Plugin Runtime identity cannot be rebound", "Plugin installation binding
cannot change generation, revision, or artifact"), so every value here is a
pure function of one ``instance_id`` string: a restarted host, or a new
connection after a runtime restart, presents exactly the same ids.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from typing import Any

from langbot_plugin.entities.io.context import (
    InstallationBinding,
    PluginWorkerPolicy,
    RuntimeConfig,
    RuntimeIdentity,
)

_NAMESPACE = uuid.UUID("6f2a6d4e-1c39-5b8e-9a61-3e0c1f6b2d47")

# The five limits RuntimeConfig requires, and the three totals that size the runtime's cap on
# plugin processes: min(max_workers, max_total_cpus / max_cpus, max_total_memory_mb /
# max_memory_mb), 8 by their defaults, beyond which it skips a plugin ("Plugin worker capacity
# reached"). oss_dev applies no rlimits, so the totals only raise that cap.
MAX_PLUGIN_PROCESSES = 256
DEFAULT_WORKER_POLICY: dict[str, Any] = {
    "max_cpus": 1.0,
    "max_memory_mb": 1024,
    "max_pids": 256,
    "max_open_files": 1024,
    "max_file_size_mb": 100,
    "max_workers": MAX_PLUGIN_PROCESSES,
    "max_total_cpus": float(MAX_PLUGIN_PROCESSES),
    "max_total_memory_mb": 1024 * MAX_PLUGIN_PROCESSES,
}


def _uuid(instance_id: str, role: str) -> str:
    return str(uuid.uuid5(_NAMESPACE, f"{role}:{instance_id}"))


def plugin_installation_uuid(instance_id: str, plugin_author: str, plugin_name: str) -> str:
    """The per-plugin installation uuid a host answers in get_plugin_settings.

    The runtime stamps it on every later call from that plugin, so it must be
    stable and distinct per plugin.
    """
    return _uuid(instance_id, f"plugin:{plugin_author}/{plugin_name}")


@dataclass(frozen=True)
class Identity:
    instance_id: str

    @property
    def instance_uuid(self) -> str:
        return _uuid(self.instance_id, "instance")

    @property
    def runtime_id(self) -> str:
        return _uuid(self.instance_id, "runtime")

    @property
    def workspace_uuid(self) -> str:
        return _uuid(self.instance_id, "workspace")

    @property
    def installation_uuid(self) -> str:
        """The host's own installation id, used on every host -> runtime call."""
        return _uuid(self.instance_id, "host-installation")

    @property
    def artifact_digest(self) -> str:
        # oss_dev checks only the form (64 lowercase hex), never the content.
        return hashlib.sha256(f"langhost:{self.instance_id}".encode()).hexdigest()

    def runtime_config(self, worker_policy: dict[str, Any] | None = None) -> dict[str, Any]:
        """Payload of set_runtime_config, validated by the SDK's own models."""
        config = RuntimeConfig(
            runtime_identity=RuntimeIdentity(
                instance_uuid=self.instance_uuid, runtime_id=self.runtime_id
            ),
            worker_policy=PluginWorkerPolicy(**(worker_policy or DEFAULT_WORKER_POLICY)),
            runtime_profile="oss_dev",
        )
        return config.model_dump(mode="json")

    def binding(self) -> dict[str, Any]:
        """The one InstallationBinding context carried by every plugin-facing call."""
        return InstallationBinding(
            instance_uuid=self.instance_uuid,
            workspace_uuid=self.workspace_uuid,
            placement_generation=1,
            installation_uuid=self.installation_uuid,
            runtime_revision=1,
            artifact_digest=self.artifact_digest,
        ).model_dump(mode="json")
