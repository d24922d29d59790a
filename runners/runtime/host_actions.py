"""What the runtime asks of the host.

The runtime calls into the host for plugin settings, binary storage, config
files and the run-scoped APIs a runner uses (state, history, events, run
ledger, steering, prompt, models, ...). ``HostActions`` is that contract;
the Django-backed implementation lives outside this package.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any


class HostError(Exception):
    """A refusal with a stable code.

    The pinned runtime forwards only an error frame's message text to the
    runner (not its data), so the code is part of the message: the runner
    sees "...: state.scope_not_enabled: scope 'x' is not enabled".
    """

    def __init__(self, code: str, message: str, *, retryable: bool = False):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.retryable = retryable

    def as_error(self) -> dict[str, Any]:
        """The structured form the SDK's AgentAPIError understands."""
        return {
            "code": self.code,
            "message": self.message,
            "retryable": self.retryable,
            "details": {},
        }


def _unsupported(action: str) -> HostError:
    return HostError("host.unsupported", f"{action} is not supported by this host")


class HostActions:
    """Host-side behaviour the runtime link delegates to.

    ``get_plugin_settings`` is required; every other method refuses with
    ``host.unsupported`` until overridden. ``context`` is the action's envelope
    as a dict (``instance_uuid``, ``workspace_uuid``, ``placement_generation``,
    ``installation_uuid`` of the calling plugin) or None. Raise ``HostError``
    to refuse with a code; any other exception becomes ``host.internal_error``.
    """

    async def get_plugin_settings(self, plugin_author: str, plugin_name: str) -> dict[str, Any]:
        """Must answer enabled, priority, plugin_config and a non-empty installation_uuid."""
        raise NotImplementedError

    async def initialize_plugin_settings(self, data: dict[str, Any]) -> None:
        """Sent for debug plugins only, before get_plugin_settings."""
        raise _unsupported("initialize_plugin_settings")

    async def get_binary_storage(self, owner_type: str, owner: str, key: str) -> bytes:
        raise _unsupported("get_binary_storage")

    async def set_binary_storage(self, owner_type: str, owner: str, key: str, value: bytes) -> None:
        raise _unsupported("set_binary_storage")

    async def get_binary_storage_keys(self, owner_type: str, owner: str) -> list[str]:
        raise _unsupported("get_binary_storage_keys")

    async def delete_binary_storage(self, owner_type: str, owner: str, key: str) -> None:
        raise _unsupported("delete_binary_storage")

    async def get_config_file(self, data: dict[str, Any]) -> dict[str, Any]:
        """Answer ``{"file_base64": ...}`` for ``data["file_key"]``."""
        raise _unsupported("get_config_file")

    async def read_file(
        self, action: str, data: dict[str, Any], context: dict[str, Any] | None
    ) -> tuple[bytes, str]:
        """The file a plugin asks for (`get_knowledge_file_stream`, `invoke_parser`: its
        `storage_path`), as `(content, extension)`; the link sends it to the runtime."""
        raise _unsupported(action)

    async def handle_run_api(
        self, action: str, data: dict[str, Any], context: dict[str, Any] | None
    ) -> dict[str, Any]:
        """Every other plugin API call (state_get, run_get, history_page, ...).

        ``data`` carries ``run_id`` and ``caller_plugin_identity``
        ("author/name", set by the runtime); authorize by both.
        """
        raise _unsupported(action)

    def stream_run_api(
        self, action: str, data: dict[str, Any], context: dict[str, Any] | None
    ) -> AsyncIterator[dict[str, Any]]:
        """Streamed plugin API calls; in 0.7.18 only invoke_llm_stream."""
        raise _unsupported(action)
