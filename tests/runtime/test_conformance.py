"""The pinned SDK and the ids LangHost derives: checks that need no runtime process."""

from __future__ import annotations

import re
from importlib.metadata import version

import pytest
from langbot_plugin.entities.io.actions.enums import (
    LangBotToRuntimeAction,
    PluginToRuntimeAction,
    RuntimeToLangBotAction,
)
from langbot_plugin.entities.io.context import InstallationBinding, RuntimeConfig
from memory_host import MemoryHost

from runners.runtime import Identity, plugin_installation_uuid
from runners.runtime.actions import HostHandler

pytestmark = pytest.mark.processes


def test_sdk_is_the_pinned_version():
    # The wire protocol is internal to the SDK; a new version needs the whole suite re-run.
    assert version("langbot-plugin") == "0.7.18"


def test_runtime_offers_the_control_actions_the_link_uses():
    names = {action.value for action in LangBotToRuntimeAction}
    assert {
        "set_runtime_config",
        "list_plugins",
        "list_runners",
        "run_runner",
        "restart_plugin",
    } <= names


class NoConnection:
    async def send(self, message): ...
    async def receive(self): ...
    async def close(self): ...


def test_host_handler_answers_every_runtime_and_plugin_action(tmp_path):
    handler = HostHandler(NoConnection(), MemoryHost(), file_storage_dir=str(tmp_path))
    expected = {a.value for a in RuntimeToLangBotAction} | {a.value for a in PluginToRuntimeAction}
    assert expected <= set(handler.actions)


@pytest.mark.asyncio
async def test_host_failures_become_error_frames_with_a_stable_code(tmp_path):
    class BrokenHost(MemoryHost):
        async def get_plugin_settings(self, plugin_author, plugin_name):
            raise KeyError("database is gone")

    handler = HostHandler(NoConnection(), BrokenHost(), file_storage_dir=str(tmp_path))
    refused = await handler.actions["state_get"]({"run_id": "r", "scope": "x", "key": "k"})
    unsupported = await handler.actions["history_search"]({"run_id": "r", "query": "q"})
    crashed = await handler.actions["get_plugin_settings"](
        {"plugin_author": "e2e", "plugin_name": "agent-runner-qa"}
    )
    assert (refused.code, refused.data["error"]["code"]) == (1, "state.scope_not_enabled")
    assert refused.message.startswith("state.scope_not_enabled: ")
    assert unsupported.message.startswith("host.unsupported: history_search")
    assert crashed.message.startswith("host.internal_error: get_plugin_settings failed: KeyError")


def test_identity_is_stable_per_instance_id_and_accepted_by_the_sdk_models():
    first, again, other = Identity("site-a"), Identity("site-a"), Identity("site-b")
    assert first.binding() == again.binding()
    assert first.runtime_config() == again.runtime_config()
    assert first.instance_uuid != other.instance_uuid
    binding = InstallationBinding.model_validate(first.binding())
    assert binding.placement_generation == 1 and binding.runtime_revision == 1
    assert re.fullmatch(r"[0-9a-f]{64}", binding.artifact_digest)
    config = RuntimeConfig.model_validate(first.runtime_config())
    assert config.runtime_profile == "oss_dev"


def test_plugin_installation_uuids_are_stable_and_distinct_per_plugin():
    qa = plugin_installation_uuid("site-a", "e2e", "agent-runner-qa")
    assert qa == plugin_installation_uuid("site-a", "e2e", "agent-runner-qa")
    assert qa != plugin_installation_uuid("site-a", "e2e", "broken-plugin")
    assert qa != plugin_installation_uuid("site-b", "e2e", "agent-runner-qa")
