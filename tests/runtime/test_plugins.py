"""Plugin lifecycle through the link: restart, and what get_plugin_settings controls."""

from __future__ import annotations

import pytest
from memory_host import MemoryHost
from runtime_helpers import QA, collect, run_context, wait_for_runner

from runners.runtime import RuntimeLink
from tests.timing import scaled

pytestmark = pytest.mark.processes


def settings_requests(host: MemoryHost) -> int:
    return sum(1 for action, _ in host.calls if action == "get_plugin_settings")


@pytest.mark.asyncio
async def test_restart_plugin_relaunches_it_and_asks_for_settings_again(link, host):
    assert settings_requests(host) == 1
    progress = await link.restart_plugin(*QA)
    assert {"current_action": "plugin restarted"} in progress
    # The runtime answers once the plugin registered; it is listed once initialized.
    await wait_for_runner(link, "plugin:e2e/agent-runner-qa/default")
    assert settings_requests(host) == 2
    assert (await collect(link, "default", run_context()))[-1]["type"] == "run.completed"


@pytest.mark.asyncio
async def test_enabled_false_does_not_hide_or_block_runners_in_0_7_18(runtime_dir):
    # The legacy data/plugins path keeps the runtime-side container's enabled=True
    # (mgr.register_plugin copies only components/manifest/status after initialize),
    # so a host must enforce "disabled" itself.
    host = MemoryHost(disabled={"e2e/agent-runner-qa"})
    link = RuntimeLink(host, "disabled", runtime_dir=runtime_dir)
    await link.start()
    try:
        await link.wait_ready(scaled(20))
        await wait_for_runner(link, "plugin:e2e/agent-runner-qa/default")
        plugins = await link.list_plugins()
        results = await collect(link, "default", run_context())
    finally:
        await link.stop()
    assert [p["enabled"] for p in plugins] == [True]
    assert results[-1]["type"] == "run.completed"
