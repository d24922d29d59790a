"""Plugins load as they do in LangBot: requirements installed first, into the plugin's own
environment and never over LangHost's SDK (a failure shown on the installation), discovery
waits for no runner a plugin does not have, and more plugins than the runtime's default
process cap all load."""

import shutil
import time
from importlib.metadata import version
from pathlib import Path

import pytest
import pytest_asyncio
import yaml

from runners.models import PluginInstallation, RunnerDescriptor, ToolDescriptor
from runners.plugins import requirements
from runners.plugins.gateway import LocalGateway
from runners.tests.conftest import FIXTURE_PLUGINS, plugins_dir_with
from tests.timing import scaled, well_before

pytestmark = [pytest.mark.processes, pytest.mark.asyncio(loop_scope="session"), pytest.mark.django_db(transaction=True)]


@pytest_asyncio.fixture(loop_scope="session")
async def gateway(tools_gateway):
    await tools_gateway.discover(scaled(30))  # every test starts from an emptied database
    return tools_gateway


async def installation(name: str) -> PluginInstallation:
    return await PluginInstallation.objects.aget(author="e2e", name=name)


# --- requirements.txt -----------------------------------------------------------------------

SDK_VERSION = version("langbot-plugin")


async def test_requirements_are_installed_into_the_plugins_own_environment(gateway):
    # The plugin imports pyjokes at load and in its tool: both work in its process.
    answer = await gateway.call_tool("e2e", "needs-pyjokes", "joke", {}, scaled(10))
    # What the runtime has loaded by now: the fixture's discovery stops waiting for a plugin
    # that comes up PLUGIN_QUIET_SECONDS after the others (a busy machine, pip before it).
    await gateway.discover(scaled(10))
    loaded = await installation("needs-pyjokes")

    assert answer["package"] == "pyjokes" and answer["joke"]
    own = requirements.site_packages(gateway.plugins_dir / "e2e__needs-pyjokes")
    assert Path(answer["loaded_from"]).is_relative_to(own)
    assert (loaded.status, loaded.last_error) == ("initialized", "")
    with pytest.raises(ModuleNotFoundError):  # not in LangHost's interpreter
        __import__("pyjokes")


async def test_a_plugin_pinning_another_sdk_is_refused_naming_the_pin_and_changes_nothing(
        gateway):
    refused = await installation("pins-old-sdk")

    assert refused.status == "failed"
    assert "langbot-plugin==0.6.0b3" in refused.last_error
    assert SDK_VERSION in refused.last_error
    assert version("langbot-plugin") == SDK_VERSION
    assert not requirements.site_packages(gateway.plugins_dir / "e2e__pins-old-sdk").exists()
    assert (await installation("needs-pyjokes")).status == "initialized"
    assert (await RunnerDescriptor.objects.aget(pk="plugin:e2e/tools-demo/default")).available


async def test_an_uninstallable_requirement_fails_its_plugin_with_pips_error(gateway):
    failed = await installation("needs-missing-package")

    assert failed.status == "failed"
    assert "langhost-e2e-no-such-package" in failed.last_error
    assert "No matching distribution" in failed.last_error
    # Kept from the runtime; the others loaded.
    assert "e2e/needs-missing-package" not in {_plugin(p) for p in gateway.plugins}
    assert (await installation("tools-demo")).status == "initialized"
    assert (await RunnerDescriptor.objects.aget(pk="plugin:e2e/tools-demo/default")).available


def _plugin(listed: dict) -> str:
    metadata = listed["manifest"]["manifest"]["metadata"]
    return f"{metadata['author']}/{metadata['name']}"


async def test_discovery_does_not_wait_for_runners_a_plugin_does_not_have(gateway):
    # needs-pyjokes has a tool and no runner: it is loaded once the runtime lists it.
    timeout = scaled(30)
    started = time.monotonic()
    await gateway.discover(timeout)

    assert time.monotonic() - started < well_before(timeout)
    assert (await installation("needs-pyjokes")).status == "initialized"


@pytest.fixture
def fake_pip(monkeypatch):
    """Stands in for pip: records each requirements file it is asked to install."""
    calls = []

    async def pip_install(lines, folder, timeout, sandbox):
        calls.append("\n".join(lines) + "\n")
        requirements.site_packages(folder).mkdir(parents=True, exist_ok=True)
        if "bad" in calls[-1]:
            return 1, "ERROR: No matching distribution found for nothing"
        return 0, "Successfully installed"

    monkeypatch.setattr(requirements, "_pip_install", pip_install)
    return calls


async def test_a_requirements_file_is_installed_once(tmp_path, fake_pip):
    plugin, markers = tmp_path / "plugin", tmp_path / "markers"
    plugin.mkdir()
    (plugin / "requirements.txt").write_text("good==1\n")

    assert await requirements.install_requirements(plugin, markers) is None
    assert await requirements.install_requirements(plugin, markers) is None
    (plugin / "requirements.txt").write_text("good==2\n")  # changed: installed again
    assert await requirements.install_requirements(plugin, markers) is None

    assert fake_pip == ["good==1\n", "good==2\n"]


async def test_a_failed_install_is_tried_again_and_answers_pips_error(tmp_path, fake_pip):
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / "requirements.txt").write_text("bad\n")

    for _ in range(2):
        error = await requirements.install_requirements(plugin, tmp_path / "markers")
        assert error == "ERROR: No matching distribution found for nothing"

    assert len(fake_pip) == 2


async def test_a_plugin_without_requirements_needs_no_pip(tmp_path, fake_pip):
    assert await requirements.install_requirements(tmp_path, tmp_path / "markers") is None
    assert fake_pip == []


async def test_pip_is_stopped_at_its_timeout(tmp_path):
    code, output = await requirements._pip_install(("pyjokes==0.8.3",), tmp_path, 0.05, None)

    assert (code, output) == (124, "pip install did not finish within 0s")


# --- more plugins than the runtime's default cap (8 processes) ------------------------------

PLUGIN_COPIES = 12


def copies_of_tools_demo(tmp_path, count: int):
    """`count` copies of the tools-demo fixture, each a plugin of its own name."""
    plugins = plugins_dir_with(tmp_path)
    for n in range(1, count + 1):
        folder = plugins / f"e2e__tools-demo-{n:02}"
        shutil.copytree(FIXTURE_PLUGINS / "e2e__tools-demo", folder)
        manifest = yaml.safe_load((folder / "manifest.yaml").read_text())
        manifest["metadata"]["name"] = f"tools-demo-{n:02}"
        (folder / "manifest.yaml").write_text(yaml.safe_dump(manifest))
    return plugins


async def test_twelve_plugins_all_load_with_their_runners_and_tools(tmp_path):
    gateway = LocalGateway(plugins_dir=copies_of_tools_demo(tmp_path, PLUGIN_COPIES),
                           runtime_dir=tmp_path / "runtime", url="", instance="twelve")
    started = time.monotonic()
    try:
        await gateway.start()
        runners = await gateway.discover(scaled(20))
        seconds = time.monotonic() - started
        # Read while this runtime is the one that listed them last: another runtime's
        # discovery would record these plugins as not loaded.
        tools = await ToolDescriptor.objects.filter(available=True,
                                                    plugin_name__startswith="tools-demo-").acount()
        initialized = await PluginInstallation.objects.filter(status="initialized").acount()
    finally:
        await gateway.stop()

    assert seconds < scaled(20)
    assert sorted(runner.pk for runner in runners) == [
        f"plugin:e2e/tools-demo-{n:02}/{name}" for n in range(1, PLUGIN_COPIES + 1)
        for name in ("default", "replier", "tool-user")]
    assert tools == 2 * PLUGIN_COPIES
    assert initialized == PLUGIN_COPIES
