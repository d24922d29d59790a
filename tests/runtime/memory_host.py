"""An in-memory ``HostActions`` for the runtime tests: the link and real runtime, no Django."""

from __future__ import annotations

from typing import Any

from runners.runtime import HostActions, HostError, plugin_installation_uuid

STATE_SCOPES = frozenset({"conversation", "actor", "subject", "runner"})


def unsupported(action: str) -> HostError:
    return HostError("host.unsupported", f"{action} is not supported by this host")


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
        raise unsupported(action)

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
        raise unsupported(action)
