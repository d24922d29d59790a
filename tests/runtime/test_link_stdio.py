"""stdio mode: the link spawns, handshakes, supervises and reaps the real runtime."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from memory_host import MemoryHost
from runtime_helpers import (
    QA,
    alive,
    group_pids,
    make_runtime_dir,
    run_context,
    wait_for_runner,
    wait_until,
)

from runners.runtime import LinkLost, LinkNotReady, RuntimeLink
from tests.timing import scaled, well_before

pytestmark = pytest.mark.processes

HOST_SCRIPT = Path(__file__).with_name("host_process.py")
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.asyncio
async def test_stdio_link_becomes_ready_and_lists_qa_runners(link):
    status = link.status()
    assert status["mode"] == "stdio" and status["state"] == "ready" and status["pid"]
    ids = {r["manifest"]["id"] for r in await link.list_runners()}
    assert {
        "plugin:e2e/agent-runner-qa/default",
        "plugin:e2e/agent-runner-qa/slow",
        "plugin:e2e/agent-runner-qa/failing",
        "plugin:e2e/agent-runner-qa/garbage",
        "plugin:e2e/agent-runner-qa/api-caller",
    } <= ids


@pytest.mark.asyncio
async def test_calls_before_ready_raise_link_not_ready(runtime_dir):
    link = RuntimeLink(MemoryHost(), "not-started", runtime_dir=runtime_dir)
    with pytest.raises(LinkNotReady):
        await link.list_runners()
    with pytest.raises(LinkNotReady):
        await link.wait_ready(0.05)


@pytest.mark.asyncio
async def test_killed_runtime_goes_down_then_ready_again_without_orphans(link):
    states = []
    link.on_state_change = lambda state, reason: states.append(state)
    old_pid = link.pid
    old_group = group_pids(link.process_group)
    assert len(old_group) >= 2, "runtime and its plugin process share a process group"

    os.kill(old_pid, signal.SIGKILL)
    await wait_until(lambda: link.state != "ready", 5, "link to notice the dead runtime")
    await link.wait_ready(scaled(15))
    await wait_for_runner(link, "plugin:e2e/agent-runner-qa/default")

    assert states[:3] == ["down", "connecting", "ready"]
    assert link.pid != old_pid and link.status()["sessions"] == 2
    assert link.last_error and "runtime exited" in link.last_error
    assert not [pid for pid in old_group if alive(pid)]


@pytest.mark.asyncio
async def test_a_hung_runtime_fails_its_pings_and_is_replaced(runtime_dir):
    link = RuntimeLink(
        MemoryHost(), "hung", runtime_dir=runtime_dir, ping_interval=0.2, ping_timeout=0.5
    )
    await link.start()
    try:
        await link.wait_ready(scaled(20))
        hung_pid = link.pid
        os.kill(hung_pid, signal.SIGSTOP)
        await wait_until(lambda: link.state != "ready", 2, "the missed ping to take it down")
        assert "did not answer __ping" in link.state_reason
        await link.wait_ready(scaled(15))
        assert link.pid != hung_pid and not alive(hung_pid)
    finally:
        await link.stop()


@pytest.mark.asyncio
async def test_runtime_death_mid_run_raises_link_lost_promptly(link):
    stream = link.run_runner(*QA, "slow", run_context("sleep please"))
    async with contextlib.aclosing(stream):
        assert (await anext(stream))["type"] == "message.delta"
        os.kill(link.pid, signal.SIGKILL)
        started = time.monotonic()
        with pytest.raises(LinkLost, match="connection lost during run_runner"):
            await asyncio.wait_for(anext(stream), scaled(5))
    assert time.monotonic() - started < well_before(30)  # the slow runner's sleep


@pytest.mark.asyncio
async def test_stop_leaves_no_runtime_or_plugin_process(link):
    group = group_pids(link.process_group)
    await link.stop()
    assert link.status()["state"] == "down" and link.status()["pid"] is None
    assert not [pid for pid in group if alive(pid)]


@pytest.mark.asyncio
async def test_sigkilled_host_leaves_no_runtime_or_plugin_process(runtime_dir):
    host = subprocess.Popen(
        [sys.executable, str(HOST_SCRIPT), str(runtime_dir)],
        stdout=subprocess.PIPE,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        text=True,
    )
    try:
        line = await asyncio.wait_for(asyncio.to_thread(host.stdout.readline), scaled(20))
        pids = json.loads(line)["group"]
        assert len(pids) >= 2, "runtime and plugin were running"
    finally:
        host.kill()
        host.wait()
    killed_at = time.monotonic()
    await wait_until(lambda: not any(alive(pid) for pid in pids), 5, "runtime and plugin to exit")
    assert time.monotonic() - killed_at < scaled(5)


@pytest.mark.asyncio
async def test_broken_plugin_stays_out_while_others_load(tmp_path):
    runtime_dir = make_runtime_dir(tmp_path, "e2e__agent-runner-qa", "e2e__broken-plugin")
    link = RuntimeLink(MemoryHost(), "broken", runtime_dir=runtime_dir)
    await link.start()
    try:
        await link.wait_ready(scaled(20))
        await wait_for_runner(link, "plugin:e2e/agent-runner-qa/default")
        # The broken plugin's process may still be `mounted` (it fails on import a moment
        # later): it never gets further, and the runtime drops it.
        deadline = asyncio.get_running_loop().time() + scaled(20)
        while True:
            plugins = {
                (p["manifest"]["manifest"]["metadata"]["name"], p["status"])
                for p in await link.list_plugins()
            }
            if ("broken-plugin", "mounted") not in plugins \
                    or asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.1)
        runners = {r["plugin_name"] for r in await link.list_runners()}
    finally:
        await link.stop()
    # The runtime never reports the failure to the host: the plugin is just absent.
    assert plugins == {("agent-runner-qa", "initialized")}
    assert runners == {"agent-runner-qa"}
