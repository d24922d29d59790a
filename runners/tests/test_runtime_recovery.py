"""A killed runtime is replaced without restarting LangHost, and its runners come back."""

import asyncio
import os
import signal
import time

import pytest

from runners.models import RunnerDescriptor
from runners.plugins.gateway import LocalGateway
from runners.tests.conftest import plugins_dir_with
from tests.timing import scaled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

ECHO = "plugin:e2e/agent-runner-qa/default"


async def echo_available() -> bool:
    return (await RunnerDescriptor.objects.aget(pk=ECHO)).available


async def echo_unavailable() -> bool:
    return not await echo_available()


async def eventually(check, timeout: float, what: str) -> None:
    timeout = scaled(timeout)  # tests/timing.py
    give_up = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < give_up, f"timed out after {timeout}s waiting for {what}"
        await asyncio.sleep(0.02)


async def test_killed_runtime_goes_down_then_ready_and_runners_come_back(tmp_path):
    gateway = LocalGateway(plugins_dir=plugins_dir_with(tmp_path, "e2e__agent-runner-qa"),
                           runtime_dir=tmp_path / "runtime", url="", instance="recovery")
    try:
        await gateway.discover(scaled(10))
        assert await echo_available()
        states, on_change = [], gateway.link.on_state_change
        gateway.link.on_state_change = lambda state, reason: (states.append(state),
                                                              on_change(state, reason))
        killed = gateway.link.pid

        os.kill(killed, signal.SIGKILL)
        await eventually(echo_unavailable, 5, "the runners to become unavailable")
        await gateway.link.wait_ready(scaled(15))
        await eventually(echo_available, 15, "the runners to be available again")

        assert states[:3] == ["down", "connecting", "ready"]
        assert gateway.link.pid not in (None, killed)
        assert gateway.link.status()["sessions"] == 2
        assert "runtime exited" in gateway.link.last_error
    finally:
        await gateway.stop()
