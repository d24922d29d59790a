"""Enabling, disabling and configuring a plugin installation in the admin reaches the runtime."""

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async

from runners.execution.orchestrator import Orchestrator
from runners.hostapi.host import DjangoHost
from runners.models import PluginInstallation, RunnerDescriptor
from runners.protocol import AgentBinding, AgentEventEnvelope, RunRefused

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

ECHO = "plugin:e2e/agent-runner-qa/default"
CHANGELIST = "/admin/runners/plugininstallation/"


@pytest.fixture
async def gateway(own_gateway):
    gateway = await own_gateway("e2e__agent-runner-qa")
    await gateway.discover(10)
    return gateway


async def qa_installation() -> PluginInstallation:
    return await PluginInstallation.objects.aget(author="e2e", name="agent-runner-qa")


async def echo_available() -> bool:
    return (await RunnerDescriptor.objects.aget(pk=ECHO)).available


async def admin_action(browser, action: str) -> None:
    selected = [str((await qa_installation()).pk)]
    response = await sync_to_async(browser.post)(
        CHANGELIST, {"action": action, "_selected_action": selected})
    assert response.status_code == 302, response.content[:500]


async def restarts_done(gateway) -> None:
    """The plugin restarts the admin scheduled in the background have finished."""
    await asyncio.gather(*[task for task in gateway._tasks
                           if task.get_coro().__qualname__.endswith("restart_plugin")])


def echo_run(gateway):
    binding = AgentBinding(binding_id="installations", runner_id=ECHO)
    return Orchestrator(gateway).run_to_end(AgentEventEnvelope(input={"text": "back"}), binding)


async def test_disabling_in_admin_makes_runners_unavailable_and_refuses_runs(admin_browser,
                                                                             gateway):
    await admin_action(admin_browser, "disable")

    assert not await echo_available()
    with pytest.raises(RunRefused):
        await echo_run(gateway)
    await restarts_done(gateway)  # the runtime relaunched it: LangHost still keeps it out
    assert not await echo_available()
    assert (await qa_installation()).status == "disabled"


async def test_enabling_in_admin_and_discovery_bring_runners_back(admin_browser, gateway):
    await PluginInstallation.objects.filter(author="e2e").aupdate(enabled=False)
    await gateway.discover(10)
    assert not await echo_available()

    await admin_action(admin_browser, "enable")
    await restarts_done(gateway)
    await gateway.discover(10)

    assert await echo_available()
    assert (await echo_run(gateway))["status"] == "completed"


async def test_config_edited_in_admin_is_answered_to_the_restarted_plugin(admin_browser,
                                                                          gateway):
    config = {"greeting": "hello from the admin"}
    answers, ask = [], gateway.link.host.get_plugin_settings

    async def recording(author, name):
        answers.append(answer := await ask(author, name))
        return answer

    gateway.link.host.get_plugin_settings = recording
    installation = await qa_installation()
    response = await sync_to_async(admin_browser.post)(
        f"{CHANGELIST}{installation.pk}/change/",
        {"enabled": "on", "priority": "0", "config": json.dumps(config), "_save": "Save"})
    assert response.status_code == 302, response.content[:2000]

    settings = await DjangoHost(gateway.instance_id).get_plugin_settings("e2e", "agent-runner-qa")
    assert settings["plugin_config"] == config
    assert "api_key" not in (await PluginInstallation.objects.aget(pk=installation.pk)).config
    await restarts_done(gateway)
    # The relaunched plugin asked for its settings and got the new config (it becomes the
    # plugin's `config`; the runtime's own list_plugins keeps the copy from registration).
    assert [answer["plugin_config"] for answer in answers] == [config]
    assert await echo_available()


async def test_a_plugins_secret_config_is_write_only_in_the_admin_and_reaches_the_plugin(
        admin_browser, gateway, settings):
    settings.LANGHOST_PLUGINS_DIR = gateway.plugins_dir
    installation = await qa_installation()
    change = f"{CHANGELIST}{installation.pk}/change/"
    secret = "sk-plugin-secret-41c9"

    await sync_to_async(admin_browser.post)(change, {
        "enabled": "on", "priority": "0", "_save": "Save",
        "config": json.dumps({"greeting": "hi", "api_key": secret})})
    page = (await sync_to_async(admin_browser.get)(change)).content.decode()
    await sync_to_async(admin_browser.post)(change, {  # saved again without it: kept
        "enabled": "on", "priority": "0", "_save": "Save",
        "config": json.dumps({"greeting": "hello"})})

    stored = (await PluginInstallation.objects.aget(pk=installation.pk)).config
    answered = await DjangoHost(gateway.instance_id).get_plugin_settings("e2e", "agent-runner-qa")
    assert secret not in page and "Secrets set" in page and "api_key" in page
    assert secret not in json.dumps(stored)
    assert answered["plugin_config"] == {"greeting": "hello", "api_key": secret}
