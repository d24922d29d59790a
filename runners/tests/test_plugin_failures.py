"""A plugin that fails to start is reported with the runtime's reason; the others still load."""

import time

import pytest
from asgiref.sync import sync_to_async

from runners.models import PluginInstallation, RunnerDescriptor
from tests.timing import scaled

pytestmark = pytest.mark.django_db(transaction=True)

REASON = "e2e broken-plugin fails at import on purpose"
TIMEOUT = scaled(10.0)


@pytest.fixture
async def broken_next_to_echo(own_gateway):
    gateway = await own_gateway("e2e__agent-runner-qa", "e2e__broken-plugin")
    started = time.monotonic()
    await gateway.discover(TIMEOUT)
    gateway.first_discovery_seconds = time.monotonic() - started
    return gateway


async def test_broken_plugin_is_failed_with_the_runtimes_reason_and_echo_still_loads(
        broken_next_to_echo):
    broken = await PluginInstallation.objects.aget(author="e2e", name="broken-plugin")
    echo = await PluginInstallation.objects.aget(author="e2e", name="agent-runner-qa")

    assert broken.status == "failed"
    assert REASON in broken.last_error
    assert (echo.status, echo.last_error) == ("initialized", "")
    assert (await RunnerDescriptor.objects.aget(pk="plugin:e2e/agent-runner-qa/default")).available


async def test_runtime_status_page_shows_the_broken_plugins_reason(
        admin_browser, broken_next_to_echo):
    page = await sync_to_async(admin_browser.get)("/admin/runtime/")

    assert page.status_code == 200
    html = page.content.decode()
    assert REASON in html and "e2e/broken-plugin" in html and "failed" in html
    assert '<td id="runtime-state"><strong>ready</strong>' in html


async def test_discovery_does_not_sit_out_its_timeout_for_a_plugin_that_died(broken_next_to_echo):
    started = time.monotonic()
    await broken_next_to_echo.discover(TIMEOUT)

    assert broken_next_to_echo.first_discovery_seconds < TIMEOUT - 2
    assert time.monotonic() - started < scaled(2)
