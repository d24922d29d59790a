"""What the runtime asks of the host, and an in-memory answer to it.

The runtime calls into the host for plugin settings, binary storage, config
files and the run-scoped APIs a runner uses (state, history, events, run
ledger, steering, prompt, models, ...). ``HostActions`` is that contract;
the Django-backed implementation lives outside this package. ``MemoryHost``
is a complete in-memory implementation for tests and benchmarks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from runners.plugins.runtime.identity import plugin_installation_uuid

STATE_SCOPES = frozenset({"conversation", "actor", "subject", "runner"})


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


_EMPTY_PAGE: dict[str, Any] = {
    "items": [],
    "next_cursor": None,
    "prev_cursor": None,
    "has_more": False,
    "total_count": 0,
}


class MemoryHost(HostActions):
    """Every plugin enabled, storage and state in dicts, empty history.

    ``disabled`` names plugins ("author/name") answered with enabled=False.
    ``calls`` records get_plugin_settings and every run API call as
    (action, data), for assertions.
    """

    def __init__(self, instance_id: str = "memory", disabled: set[str] | None = None):
        self.instance_id = instance_id
        self.disabled = set(disabled or ())
        self.storage: dict[tuple[str, str, str], bytes] = {}
        self.state: dict[tuple[str, str], Any] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def get_plugin_settings(self, plugin_author: str, plugin_name: str) -> dict[str, Any]:
        self.calls.append(
            ("get_plugin_settings", {"plugin_author": plugin_author, "plugin_name": plugin_name})
        )
        return {
            "enabled": f"{plugin_author}/{plugin_name}" not in self.disabled,
            "priority": 0,
            "plugin_config": {},
            "installation_uuid": plugin_installation_uuid(
                self.instance_id, plugin_author, plugin_name
            ),
            "install_source": "local",
            "install_info": {},
        }

    async def initialize_plugin_settings(self, data: dict[str, Any]) -> None:
        return None

    async def get_binary_storage(self, owner_type: str, owner: str, key: str) -> bytes:
        try:
            return self.storage[(owner_type, owner, key)]
        except KeyError:
            raise HostError("storage.not_found", f"no {owner_type} storage key {key!r}") from None

    async def set_binary_storage(self, owner_type: str, owner: str, key: str, value: bytes) -> None:
        self.storage[(owner_type, owner, key)] = value

    async def get_binary_storage_keys(self, owner_type: str, owner: str) -> list[str]:
        return [k for (t, o, k) in self.storage if (t, o) == (owner_type, owner)]

    async def delete_binary_storage(self, owner_type: str, owner: str, key: str) -> None:
        self.storage.pop((owner_type, owner, key), None)

    async def get_config_file(self, data: dict[str, Any]) -> dict[str, Any]:
        raise HostError("config_file.not_found", f"no config file {data.get('file_key')!r}")

    async def handle_run_api(
        self, action: str, data: dict[str, Any], context: dict[str, Any] | None
    ) -> dict[str, Any]:
        self.calls.append((action, data))
        if action.startswith("state_"):
            return self._state(action, data)
        if action == "run_get":
            return {"run_id": data["target_run_id"], "status": "running"}
        if action in ("history_page", "event_page", "run_events_page", "run_list"):
            return dict(_EMPTY_PAGE)
        if action == "event_get":
            return {"event_id": data["event_id"], "event_type": "message.received", "source": "api"}
        if action == "steering_pull":
            return {"items": []}
        if action == "get_prompt":
            return {"prompt": []}
        raise _unsupported(action)

    def _state(self, action: str, data: dict[str, Any]) -> dict[str, Any]:
        scope = data.get("scope")
        if scope not in STATE_SCOPES:
            raise HostError("state.scope_not_enabled", f"scope {scope!r} is not enabled")
        if action == "state_get":
            return {"value": self.state.get((scope, data["key"]))}
        if action == "state_set":
            self.state[(scope, data["key"])] = data["value"]
            return {"success": True}
        if action == "state_delete":
            existed = (scope, data["key"]) in self.state
            self.state.pop((scope, data["key"]), None)
            return {"success": existed}
        if action == "state_list":
            prefix = data.get("prefix") or ""
            keys = sorted(k for (s, k) in self.state if s == scope and k.startswith(prefix))
            limit = data.get("limit") or 100
            return {"keys": keys[:limit], "has_more": len(keys) > limit}
        raise _unsupported(action)
