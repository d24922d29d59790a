"""A plugin that fails to start is reported with its own reason; the others still load."""

import asyncio
import shutil
import time
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async

from runners.execution.orchestrator import Orchestrator
from runners.models import PluginInstallation, RunnerDescriptor
from runners.protocol import AgentBinding, AgentEventEnvelope
from tests.timing import scaled

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "plugins"

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

REASON = "e2e broken-plugin fails at import on purpose"


def discovery_timeout() -> float:
    """Long beside a discovery's few seconds: one that sits it out is told apart on any machine."""
    return scaled(30.0)


@pytest.fixture
async def broken_next_to_echo(own_gateway):
    gateway = await own_gateway("e2e__agent-runner-qa", "e2e__broken-plugin")
    started = time.monotonic()
    gateway.first_discovery_timeout = discovery_timeout()
    await gateway.discover(gateway.first_discovery_timeout)
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
    timeout = discovery_timeout()
    started = time.monotonic()
    await broken_next_to_echo.discover(timeout)

    first = broken_next_to_echo
    assert first.first_discovery_seconds < first.first_discovery_timeout / 3
    assert time.monotonic() - started < timeout / 3


async def test_a_plugin_that_keeps_crashing_is_stopped_with_its_own_reason(own_gateway,
                                                                          monkeypatch):
    monkeypatch.setenv("LANGHOST_PLUGIN_MAX_CRASHES", "2")
    gateway = await own_gateway("e2e__agent-runner-qa", "e2e__broken-plugin")
    log = gateway.link.log_tail

    await until(lambda: "[plugin e2e__broken-plugin] stopped after 2 crashes in a row" in log)
    await asyncio.sleep(scaled(3))  # the SDK would have restarted it after 1-2 s
    await gateway.discover(discovery_timeout())

    broken = await PluginInstallation.objects.aget(author="e2e", name="broken-plugin")
    assert broken.status == "failed"
    assert broken.last_error == f"RuntimeError: {REASON} (stopped after 2 crashes in a row)"
    starts = [line for line in log if line.startswith("[plugin e2e__broken-plugin] Traceback")]
    assert len(starts) == 2
    echo = await PluginInstallation.objects.aget(author="e2e", name="agent-runner-qa")
    assert (echo.status, echo.last_error) == ("initialized", "")


def bad_plugins(plugins_dir: Path) -> dict[str, str]:
    """Six broken plugin folders beside the others: `{plugin id: what its reason says}`."""
    def folder(name: str, manifest: str | None, main: str | None = None) -> Path:
        path = plugins_dir / name
        shutil.copytree(FIXTURES / "e2e__agent-runner-qa", path)
        if manifest is not None:
            (path / "manifest.yaml").write_text(manifest)
        else:
            text = (path / "manifest.yaml").read_text()
            (path / "manifest.yaml").write_text(text.replace("author: e2e", "author: bad").replace(
                "name: agent-runner-qa", f"name: {name.split('__')[1]}"))
        if main is not None:
            (path / "main.py").write_text(main)
        return path

    folder("bad__list-manifest", "- metadata\n- spec\n")
    folder("bad__string-metadata", 'apiVersion: v1\nmetadata: "str"\n')
    folder("bad__invalid-yaml", "metadata: [unclosed\n")
    (folder("bad__no-code", None) / "main.py").unlink()
    folder("bad__crash-at-import", None, "raise RuntimeError('bad crash-at-import on purpose')\n")
    folder("bad__hang-at-start", None, "import time\ntime.sleep(3600)\n")
    return {"bad/list-manifest": "must be a mapping, not list",
            "bad/string-metadata": "`metadata` must be a mapping",
            "bad/invalid-yaml": "not valid YAML",
            "bad/no-code": "Python entry main.py is missing",
            "bad/crash-at-import": "bad crash-at-import on purpose",
            "bad/hang-at-start": ""}


async def test_bad_plugin_folders_fail_alone_each_with_its_own_reason(own_gateway, tmp_path):
    gateway = await own_gateway("e2e__agent-runner-qa")
    expected = bad_plugins(gateway.plugins_dir)
    await gateway.stop()
    timeout = discovery_timeout()
    started = time.monotonic()
    await gateway.start()

    discovered = await gateway.discover(timeout)
    seconds = time.monotonic() - started

    assert "plugin:e2e/agent-runner-qa/default" in [runner.pk for runner in discovered]
    assert seconds < timeout / 2, "discovery does not sit out its timeout for the hanging plugin"
    installations = {row.plugin_id: row async for row in PluginInstallation.objects.all()}
    assert installations["e2e/agent-runner-qa"].status == "initialized"
    for plugin_id, reason in expected.items():
        assert installations[plugin_id].status != "initialized", plugin_id
        assert reason in installations[plugin_id].last_error, (plugin_id, installations[
            plugin_id].last_error)
    errors = [installations[plugin_id].last_error for plugin_id in expected]
    assert len(set(errors)) == len(errors), "each bad plugin shows its own reason"
    event = AgentEventEnvelope(input={"text": "still here"})
    outcome = await Orchestrator(gateway).run_to_end(event, AgentBinding(
        binding_id="qa", runner_id="plugin:e2e/agent-runner-qa/default"))
    assert outcome["status"] == "completed"


async def test_a_folder_added_broken_then_fixed_loads_without_restarting_langhost(own_gateway):
    gateway = await own_gateway("e2e__agent-runner-qa")
    await gateway.discover(discovery_timeout())
    folder = gateway.plugins_dir / "bad__fixable"
    shutil.copytree(FIXTURES / "e2e__agent-runner-qa", folder)
    good_manifest = (folder / "manifest.yaml").read_text().replace(
        "author: e2e", "author: bad").replace("name: agent-runner-qa", "name: fixable")
    (folder / "manifest.yaml").write_text("- broken\n")

    await until(lambda: installation_status("bad", "fixable") == "failed")
    (folder / "manifest.yaml").write_text(good_manifest)
    await until(lambda: installation_status("bad", "fixable") == "initialized")

    await until(lambda: RunnerDescriptor.objects.filter(pk="plugin:bad/fixable/default",
                                                        available=True).exists())


def installation_status(author: str, name: str) -> str | None:
    return PluginInstallation.objects.filter(author=author, name=name).values_list(
        "status", flat=True).first()


async def until(condition, seconds: float = 20) -> None:
    give_up = time.monotonic() + scaled(seconds)
    while not await sync_to_async(condition)():
        assert time.monotonic() < give_up, "the condition never held"
        await asyncio.sleep(0.1)
