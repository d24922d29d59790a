"""Admin pages for runners, installations and the runtime, and the runtime status API."""

import pytest
import pytest_asyncio
from asgiref.sync import sync_to_async
from django.contrib.admin.utils import quote
from django.urls import reverse

from runners.models import PluginInstallation
from runners.tests.conftest import serve_as_process_gateway

pytestmark = [pytest.mark.processes, pytest.mark.asyncio(loop_scope="session"), pytest.mark.django_db(transaction=True)]


@pytest_asyncio.fixture(loop_scope="session")
async def discovered(qa_gateway, monkeypatch):
    """Descriptors and installations stored, and `get_gateway()` answering with the gateway."""
    serve_as_process_gateway(monkeypatch, qa_gateway)
    await qa_gateway.discover(10)
    return qa_gateway


async def get(browser, url: str):
    response = await sync_to_async(browser.get)(url)
    assert response.status_code == 200, (url, response.status_code)
    return response.content.decode()


def descriptor_url(runner_id: str) -> str:
    return reverse("admin:runners_runnerdescriptor_change", args=[quote(runner_id)])


async def test_runner_descriptor_changelist_lists_plugin_and_builtin_runners(admin_browser,
                                                                             discovered):
    html = await get(admin_browser, reverse("admin:runners_runnerdescriptor_changelist"))

    assert "plugin:e2e/agent-runner-qa/default" in html and "builtin:echo" in html


async def test_runner_descriptor_page_renders_capabilities_and_config(admin_browser,
                                                                      discovered):
    html = await get(admin_browser, descriptor_url("plugin:e2e/agent-runner-qa/slow"))

    assert "streaming" in html  # the one capability the slow runner has
    assert "<code>sleep</code> (float): Sleep seconds" in html
    assert "Sleeps (config sleep" in html  # the description


async def test_runner_descriptor_page_renders_permissions(admin_browser, discovered):
    html = await get(admin_browser, descriptor_url("plugin:e2e/agent-runner-qa/api-caller"))

    assert "history: page; events: get, page; storage: plugin" in html


async def test_plugin_installation_pages_load(admin_browser, discovered):
    installation = await PluginInstallation.objects.aget(author="e2e", name="agent-runner-qa")

    changelist = await get(admin_browser, reverse("admin:runners_plugininstallation_changelist"))
    change = await get(admin_browser, reverse("admin:runners_plugininstallation_change",
                                              args=[installation.pk]))

    assert "e2e/agent-runner-qa" in changelist and "initialized" in changelist
    assert 'name="config"' in change and 'name="enabled"' in change


async def test_runtime_api_reports_mode_and_state(superuser_client, discovered):
    response = await sync_to_async(superuser_client.get)("/api/v1/runners/runtime")

    assert response.status_code == 200
    status = response.json()
    assert (status["mode"], status["state"]) == ("stdio", "ready")
    assert status["pid"] == discovered.link.pid and status["uptime"] > 0
