"""The runtime dying mid-run ends the run with a reason; nothing stays `running`."""

import asyncio
import os
import signal

import pytest

from ledger.models import AgentRun
from runners.execution.orchestrator import Orchestrator
from runners.plugins.gateway import LocalGateway
from runners.protocol import AgentBinding, AgentEventEnvelope, new_run_id
from runners.runtime import sandbox
from runners.tests.conftest import plugins_dir_with
from runners.tests.langhost_process import descendants
from tests.timing import scaled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]


async def test_runtime_killed_mid_run_fails_the_run(tmp_path):
    gateway = LocalGateway(plugins_dir=plugins_dir_with(tmp_path, "e2e__agent-runner-qa"),
                           runtime_dir=tmp_path / "runtime", url="", instance="runtime-loss")
    try:
        run_id = new_run_id()
        binding = AgentBinding(binding_id="loss", runner_id="plugin:e2e/agent-runner-qa/slow",
                               runner_config={"sleep": 30})
        stream = Orchestrator(gateway).run(AgentEventEnvelope(input={"text": "x"}), binding,
                                           run_id=run_id)
        assert (await anext(stream)).type == "message.delta"

        os.kill(gateway.link.pid, signal.SIGKILL)
        assert await asyncio.wait_for(anext(stream, None), scaled(5.0)) is None

        run = await AgentRun.objects.aget(run_id=run_id)
        assert run.status == "failed"
        assert run.status_reason
        assert await AgentRun.objects.filter(status="running").acount() == 0
    finally:
        await gateway.stop()


def plugin_processes(runtime_pid: int) -> list[int]:
    """The runtime's plugin processes (inside their sandboxes, where there are any: not the
    processes that confine them)."""
    found = []
    for pid in descendants(runtime_pid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                argv = cmdline.read().split(b"\0")
        except OSError:
            continue
        confining = argv[0].endswith(b"bwrap") or sandbox.CONFINE.encode() in argv
        if b"langbot_plugin.cli.__init__" in argv and not confining:
            found.append(pid)
    return found


async def test_a_run_for_a_plugin_whose_process_died_waits_for_its_return(tmp_path):
    gateway = LocalGateway(plugins_dir=plugins_dir_with(tmp_path, "e2e__agent-runner-qa"),
                           runtime_dir=tmp_path / "runtime", url="", instance="plugin-loss")
    try:
        await gateway.discover()
        plugins = plugin_processes(gateway.link.pid)
        assert plugins, "the QA plugin runs in a process of its own"

        for pid in plugins:
            os.kill(pid, signal.SIGKILL)
        outcome = await Orchestrator(gateway).run_to_end(
            AgentEventEnvelope(input={"text": "back"}),
            AgentBinding(binding_id="loss", runner_id="plugin:e2e/agent-runner-qa/default",
                         timeout_seconds=scaled(30)))

        assert outcome["status"] == "completed", outcome["status_reason"]
        assert not set(plugin_processes(gateway.link.pid)) & set(plugins)
    finally:
        await gateway.stop()
