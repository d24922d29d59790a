import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runners.runtime.loop_bound import submit
from runners.runtime.process import free_port
from runners.tools import mcp
from runners.tools.mcp import ServerSpec
from tests.timing import scaled

FIXTURES = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "mcp"
SERVER = FIXTURES / "server.py"  # tools: add, echo, fail, pid, greet, header, sleep
HOLD_SESSION = FIXTURES / "hold_session.py"

# Searched for in every response and page: it must never show up.
SECRET = "tok-never-shown-5Jd9"


def stdio_spec(key="stdio", **fields) -> ServerSpec:
    return ServerSpec(key=key, name=key, transport="stdio", command=sys.executable,
                      args=(str(SERVER),), **fields)


def alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie no longer does: nobody may be left to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_until_gone(pid: int, seconds: float = 5) -> bool:
    deadline = time.monotonic() + scaled(seconds)
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


@pytest.fixture(scope="session")
def http_url():
    """The fixture server over Streamable HTTP on 127.0.0.1, for the whole session."""
    port = free_port()
    process = subprocess.Popen([sys.executable, str(SERVER), "--http", str(port)])
    deadline = time.monotonic() + scaled(20)
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert process.poll() is None and time.monotonic() < deadline, "no HTTP server"
            time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/mcp"
    process.kill()
    process.wait()


@pytest.fixture
def http_spec(http_url) -> ServerSpec:
    return ServerSpec(key="http", name="http", transport="streamable-http", url=http_url,
                      headers=(("X-Token", SECRET),))


@pytest.fixture(autouse=True)
def close_process_sessions():
    """Sessions the test opened through this process's registry (views, the admin) end with it."""
    yield
    if mcp._process_sessions is not None:
        registry = mcp._process_sessions
        submit(registry.close(), registry.loop).result(timeout=scaled(30))

