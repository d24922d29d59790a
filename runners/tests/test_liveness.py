"""A run's lease is kept by the process executing it; runs whose process died are reaped."""

import asyncio
import contextlib
from datetime import timedelta

import pytest
from django.utils import timezone

from ledger.models import AgentRun
from ledger.services import runs as ledger
from runners.execution.orchestrator import Orchestrator
from runners.protocol import AgentBinding, AgentEventEnvelope
from runners.runtime import host_process as process_module
from runners.runtime import liveness
from runners.runtime.host_process import HostProcess
from tests.timing import scaled

pytestmark = [pytest.mark.processes, pytest.mark.backend, pytest.mark.asyncio(loop_scope="session"), pytest.mark.django_db(transaction=True)]


async def running(run_id: str, owner: str, lease_in_seconds: float) -> AgentRun:
    return await AgentRun.objects.acreate(
        run_id=run_id, event_id=f"evt-{run_id}", runner_id="builtin:echo", status="running",
        execution_owner_id=owner, started_at=timezone.now(),
        lease_expires_at=timezone.now() + timedelta(seconds=lease_in_seconds))


async def lease_left(run_id: str) -> float:
    run = await AgentRun.objects.aget(run_id=run_id)
    return (run.lease_expires_at - timezone.now()).total_seconds()


async def test_renewals_and_reaping_tick_six_times_a_lease(settings):
    settings.LANGHOST_RUN_LEASE_SECONDS = 3

    assert liveness.tick_seconds() == 0.5


async def test_a_run_starts_with_the_configured_lease(settings):
    settings.LANGHOST_RUN_LEASE_SECONDS = 42

    await ledger.start_run(
        run={"run_id": "leased", "event_id": "evt-leased", "runner_id": "builtin:echo"},
        event_log={"event_id": "evt-leased", "event_type": "message.received"},
        user_transcript=None, owner_id="me", scope_keys={})

    assert 42 - scaled(2) < await lease_left("leased") <= 42


async def test_the_heartbeat_renews_only_the_runs_its_process_executes(settings):
    settings.LANGHOST_RUN_LEASE_SECONDS = 60
    await running("mine", "me", 1)
    await running("mine-but-gone", "me", 1)
    await running("someone-elses", "them", 1)

    await liveness.Heartbeat("me", lambda: ["mine", "someone-elses"]).beat()

    assert await lease_left("mine") > 60 - scaled(5)
    assert await lease_left("mine-but-gone") < 2
    assert await lease_left("someone-elses") < 2


@pytest.fixture
def fresh_process(monkeypatch):
    """A process of its own, so its heartbeat ticks at this test's lease."""
    process = HostProcess()
    monkeypatch.setattr(process_module, "_process", process)
    return process


async def test_a_run_longer_than_its_lease_completes_while_a_dead_ones_is_reaped(
        settings, qa_gateway, fresh_process):
    settings.LANGHOST_RUN_LEASE_SECONDS = lease = scaled(0.6)
    await running("orphan", "a-process-that-died", lease)
    reaper = asyncio.ensure_future(liveness.reap_forever())
    binding = AgentBinding(binding_id="liveness", runner_id="plugin:e2e/agent-runner-qa/slow")
    try:
        outcome = await Orchestrator(qa_gateway).run_to_end(
            AgentEventEnvelope(input={"text": f"deltas:4:{lease * 5 / 6}"}), binding)
    finally:
        reaper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reaper

    deltas = [m for m in outcome["messages"] if m["type"] == "message.delta"]
    assert (outcome["status"], len(deltas)) == ("completed", 4)  # 2.5 leases long
    run = await AgentRun.objects.aget(run_id=outcome["run_id"])
    assert run.execution_owner_id == fresh_process.owner_id
    orphan = await AgentRun.objects.aget(run_id="orphan")
    assert orphan.status == "failed" and "stopped renewing its lease" in orphan.status_reason
