"""A run stream's last frame reaches a client that is slow to read: a real `manage.py serve`
closing `ws/runs/<id>/` does not drop the connection, and what it has not yet written, before
the client has read the run's final status (a busy client, e.g. one of hundreds of viewers,
reads and answers the close late)."""

import base64
import json
import os
import socket
import struct
import time

import httpx
import pytest

from runners.runtime.process import free_port
from runners.tests.langhost_process import fresh_data_dir, start_serve, wait_until_serving
from tests.timing import scaled

pytestmark = pytest.mark.processes

# Longer than autobahn's own close-handshake timeout (1 s), after which it would drop it.
SLOW_READER_SECONDS = 3
# The longest input text: its events are more than a small receive buffer and the server's
# first send buffer hold, so the rest, the final status with it, waits in the server.
REPLY = "x" * 20000


@pytest.fixture
def served(tmp_path):
    port = free_port()
    (tmp_path / "plugins").mkdir()
    process = start_serve(fresh_data_dir(tmp_path / "data"), tmp_path / "plugins", port)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=scaled(30)) as http:
            yield port, http, wait_until_serving(http, process)
    finally:
        process.terminate()
        process.wait(timeout=scaled(30))


def frames_of(data: bytes) -> list[tuple[int, bytes]]:
    """`(opcode, payload)` of each whole frame a server sent (servers do not mask)."""
    frames = []
    while len(data) >= 2:
        length, offset = data[1] & 0x7F, 2
        if length == 126:
            (length,), offset = struct.unpack("!H", data[2:4]), 4
        elif length == 127:
            (length,), offset = struct.unpack("!Q", data[2:10]), 10
        if len(data) < offset + length:
            break
        frames.append((data[0] & 0x0F, data[offset:offset + length]))
        data = data[offset + length:]
    return frames


def test_a_client_slow_to_read_still_gets_the_final_status_then_a_normal_close(served):
    port, http, token = served
    run = http.post("/api/v1/runs", json={"runner_id": "builtin:echo", "input": {"text": REPLY}},
                    headers={"Authorization": f"Bearer {token}"}).json()
    key = base64.b64encode(os.urandom(16)).decode()

    with socket.socket() as client:
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        client.settimeout(scaled(30))
        client.connect(("127.0.0.1", port))
        client.sendall((f"GET /ws/runs/{run['run_id']}/?token={token} HTTP/1.1\r\n"
                        f"Host: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                        "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        time.sleep(SLOW_READER_SECONDS)  # the server sends everything and closes meanwhile
        received = b""
        while not any(opcode == 8 for opcode, _ in frames_of(received.partition(b"\r\n\r\n")[2])):
            chunk = client.recv(65536)
            assert chunk, "the connection ended before the close frame"
            received += chunk

    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101")
    frames = frames_of(body)
    texts = [json.loads(payload) for opcode, payload in frames if opcode == 1]
    assert texts[-1]["type"] == "run.status" and texts[-1]["status"] == "completed"
    assert REPLY in json.dumps(texts[:-1])
    assert frames[-1] == (8, struct.pack("!H", 1000))
