"""Connection to the LangBot plugin SDK runtime (pure asyncio, no Django).

The wire protocol is the SDK's own (site-packages `langbot_plugin`). Django-backed behaviour is
injected through ``HostActions``.
"""

from runners.runtime.host import HostActions, HostError
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
