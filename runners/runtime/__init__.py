"""The transport below the engine: the link to the LangBot plugin SDK runtime (pure asyncio:
its wire protocol is the SDK's own, site-packages `langbot_plugin`, and Django-backed behaviour
is injected through ``HostActions``), the runtime worker's Channels transport, the process's
loop and runs (`host_process`), run liveness, and the run handle's contract (`run_handle`).
"""

from runners.runtime.host_actions import HostActions, HostError
from runners.runtime.identity import Identity, plugin_installation_uuid
from runners.runtime.link import (
    LinkLost,
    LinkNotReady,
    RuntimeLink,
    RuntimeLinkError,
    ToolNotFound,
    item_timeout_for,
)

__all__ = [
    "HostActions",
    "HostError",
    "Identity",
    "LinkLost",
    "LinkNotReady",
    "RuntimeLink",
    "RuntimeLinkError",
    "ToolNotFound",
    "item_timeout_for",
    "plugin_installation_uuid",
]
