"""The plugin runtime exposes nothing beyond loopback, and nothing without credentials."""

import os
import socket
from pathlib import Path

import httpx
import pytest

from runners.tests.langhost_process import descendants
from tests.timing import scaled

pytestmark = [pytest.mark.processes, pytest.mark.asyncio(loop_scope="session"), pytest.mark.django_db(transaction=True)]


def listening(pids: set[int]) -> list[tuple[str, int]]:
    """`(address, port)` of every TCP socket these processes listen on, read from /proc."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    found = []
    for table, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != "0A" or fields[9] not in inodes:  # 0A: LISTEN
                continue
            address, port = fields[1].split(":")
            raw = bytes.fromhex(address)
            # /proc prints each 32-bit word in host (little-endian) order.
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            found.append((socket.inet_ntop(family, raw), int(port, 16)))
    return found


async def test_the_runtime_listens_on_loopback_only_and_answers_nothing_without_credentials(
        qa_gateway):
    await qa_gateway.discover(scaled(30))
    runtime = qa_gateway.link.pid

    sockets = listening({runtime, *descendants(runtime)})

    assert sockets, "the runtime's WebSocket server listens"
    assert {address for address, _ in sockets} <= {"127.0.0.1", "::1"}, sockets
    async with httpx.AsyncClient(timeout=scaled(10)) as http:
        for _, port in sockets:
            health = await http.get(f"http://127.0.0.1:{port}/healthz")
            assert health.status_code == 401, (port, health.text)
