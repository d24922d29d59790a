"""Sessions to real MCP servers (the SDK's own server, `tests/fixtures/mcp/server.py`) over
stdio and Streamable HTTP: listing, calling, failing, dying and restarting."""

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest
import pytest_asyncio

from runners.models import McpServer
from runners.tests.tools.conftest import (
    HOLD_SESSION,
    SECRET,
    SERVER,
    alive,
    stdio_spec,
    wait_until_gone,
)
from runners.tools import mcp, mcp_servers
from runners.tools.errors import ToolError
from runners.tools.mcp import McpSessions, ServerSpec
from tests.timing import scaled

pytestmark = pytest.mark.processes


@pytest_asyncio.fixture
async def registry():
    """Sessions of the test's own loop, closed when it ends."""
    registry = McpSessions(asyncio.get_running_loop())
    yield registry
    await registry.close()


@pytest.fixture(params=["stdio", "streamable-http"])
def spec(request):
    return stdio_spec() if request.param == "stdio" else request.getfixturevalue("http_spec")


async def server_pid(registry, spec) -> int:
    return (await registry.call_tool(spec, "pid", {}))["structuredContent"]["result"]


async def test_lists_the_tools_of_a_server(registry, spec):
    tools = {tool["name"]: tool for tool in await registry.list_tools(spec)}

    assert {"add", "echo", "fail"} <= set(tools)
    assert tools["add"]["description"] == "Add two numbers."
    assert tools["add"]["inputSchema"]["required"] == ["a", "b"]
    assert set(tools["add"]["inputSchema"]["properties"]) == {"a", "b"}


async def test_calls_a_tool(registry, spec):
    answer = await registry.call_tool(spec, "add", {"a": 2, "b": 3})

    assert answer == {"text": "5", "structuredContent": {"result": 5}}


async def test_a_tool_error_raises_with_its_text(registry, spec):
    with pytest.raises(ToolError, match="boom"):
        await registry.call_tool(spec, "fail", {"message": "boom"})

    assert (await registry.call_tool(spec, "echo", {"text": "still here"}))["text"] == \
        "still here"


async def test_one_session_serves_every_call(registry, spec):
    first = await server_pid(registry, spec)
    await registry.list_tools(spec, refresh=True)

    assert await server_pid(registry, spec) == first


async def test_env_reaches_a_stdio_server_and_headers_an_http_one(registry, http_spec):
    greeted = await registry.call_tool(stdio_spec(env=(("GREETING", "hello"),)), "greet", {})
    header = await registry.call_tool(http_spec, "header", {"name": "X-Token"})

    assert greeted["text"] == "hello"
    assert header["text"] == SECRET


async def test_killing_the_stdio_server_fails_that_call_and_the_next_one_restarts_it(registry,
                                                                                  tmp_path):
    sleeping = tmp_path / "sleeping"
    spec = stdio_spec(env=(("SLEEPING_MARKER", str(sleeping)),))
    pid = await server_pid(registry, spec)
    call = asyncio.create_task(registry.call_tool(spec, "sleep", {"seconds": 30}))
    give_up = time.monotonic() + scaled(10)
    while not sleeping.exists():  # the call is in flight
        assert time.monotonic() < give_up, "the server never began the call"
        await asyncio.sleep(0.02)

    os.kill(pid, signal.SIGKILL)

    with pytest.raises(ToolError, match="lost its connection while calling 'sleep'"):
        async with asyncio.timeout(scaled(10)):
            await call
    answer = await registry.call_tool(spec, "add", {"a": 2, "b": 3})
    assert answer["text"] == "5"
    assert await server_pid(registry, spec) != pid


async def test_a_server_that_died_idle_restarts_on_the_next_call(registry):
    spec = stdio_spec()
    pid = await server_pid(registry, spec)
    os.kill(pid, signal.SIGKILL)
    await asyncio.to_thread(wait_until_gone, pid)
    await asyncio.sleep(scaled(0.2))  # the session notices its stream ended

    assert (await registry.call_tool(spec, "add", {"a": 1, "b": 1}))["text"] == "2"


async def test_the_stdio_server_is_gone_once_the_sessions_close(registry):
    pid = await server_pid(registry, stdio_spec())
    assert alive(pid)

    await registry.close()

    assert await asyncio.to_thread(wait_until_gone, pid)


async def test_a_call_over_its_time_fails_alone(registry):
    spec = stdio_spec()

    with pytest.raises(ToolError, match="did not answer 'sleep' within 0.5 s"):
        await registry.call_tool(spec, "sleep", {"seconds": 30}, timeout=0.5)
    assert (await registry.call_tool(spec, "add", {"a": 2, "b": 2}))["text"] == "4"


async def test_a_server_that_cannot_start_says_why_and_backs_off(registry):
    spec = ServerSpec(key="missing", name="missing", transport="stdio",
                      command="no-such-mcp-server")

    with pytest.raises(ToolError, match="could not be reached: command not found: "
                                        "no-such-mcp-server"):
        await registry.list_tools(spec)
    with pytest.raises(ToolError, match=r"is unavailable \(command not found.*next try in"):
        await registry.call_tool(spec, "add", {"a": 1, "b": 2})
    with pytest.raises(ToolError, match="could not be reached"):  # asked for: tried at once
        await registry.list_tools(spec, refresh=True)


async def test_a_server_that_exits_at_start_fails_clearly(registry):
    spec = ServerSpec(key="exits", name="exits", transport="stdio", command=sys.executable,
                      args=("-c", "pass"))

    with pytest.raises(ToolError, match="'exits' could not be reached: the server closed "
                                        "the connection"):
        await registry.list_tools(spec)


async def test_a_server_that_fails_at_start_says_why_in_its_own_words(registry):
    spec = ServerSpec(key="broken", name="broken", transport="stdio", command=sys.executable,
                      args=("-c", "import a_module_nobody_installed"))

    with pytest.raises(ToolError) as failed:
        await registry.list_tools(spec)

    assert "'broken' could not be reached: the server closed the connection. Its stderr " \
           "ended with:" in str(failed.value)
    assert str(failed.value).endswith(
        "ModuleNotFoundError: No module named 'a_module_nobody_installed'")


async def test_an_unreachable_http_server_fails_clearly(registry):
    spec = ServerSpec(key="nowhere", name="nowhere", transport="streamable-http",
                      url="http://127.0.0.1:9/mcp")

    with pytest.raises(ToolError, match="'nowhere' could not be reached"):
        await registry.list_tools(spec)


async def test_an_edited_server_gets_a_new_session(registry):
    pid = await server_pid(registry, stdio_spec())
    edited = stdio_spec(env=(("GREETING", "edited"),))

    assert (await registry.call_tool(edited, "greet", {}))["text"] == "edited"
    assert await server_pid(registry, edited) != pid
    assert await asyncio.to_thread(wait_until_gone, pid)


async def test_the_process_sessions_serve_a_stored_server_from_any_loop():
    server = McpServer(name="stored", transport="stdio", command=sys.executable,
                       args=[str(SERVER)])
    mcp_servers.set_env(server, {"GREETING": "from the process loop"})

    answer = await mcp.call_tool(server, "greet", {})

    assert answer["text"] == "from the process loop"
    assert mcp.sessions().loop is not asyncio.get_running_loop()


async def test_a_disabled_server_is_not_called():
    server = McpServer(name="off", transport="stdio", command=sys.executable,
                       args=[str(SERVER)], enabled=False)

    with pytest.raises(ToolError, match="'off' is disabled"):
        await mcp.call_tool(server, "add", {"a": 1, "b": 2})


def test_a_stdio_server_dies_with_langhost_even_when_it_is_sigkilled():
    langhost = subprocess.Popen([sys.executable, str(HOLD_SESSION)], stdout=subprocess.PIPE,
                                text=True)
    try:
        pid = int(langhost.stdout.readline())
        assert alive(pid)
    finally:
        langhost.kill()
        langhost.wait()

    assert wait_until_gone(pid)


def test_the_guard_kills_even_a_command_that_ignores_its_closed_stdin():
    """`die_with_parent.py` alone: `sleep` never reads stdin, only the kernel's signal ends it."""
    parent = subprocess.Popen([sys.executable, "-c", (
        "import os, subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-I', {str(mcp.DIE_WITH_PARENT)!r}, "
        "str(os.getpid()), 'sleep', '600'])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(600)\n")], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(parent.stdout.readline())
        assert alive(pid)
    finally:
        parent.kill()
        parent.wait()

    assert wait_until_gone(pid)
