"""The built-in LLM agent works in its conversation's sandbox box (the default `sandbox`
backend, each command confined): it runs a command and answers with its output, a path out of
its workspace is refused, a command past its time or memory is cut off and said so, its files
are its conversation's alone, and what it runs sees nothing of the host: no data dir, no
database, no process, no network. On the SDK's box server (`host-unsafe`), a box server
killed under a call fails that call only — the next run gets a fresh one."""

import asyncio
import json
import sys
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async

from runners.box.server import box_server
from runners.conversations.input import Part
from runners.models import LLM_AGENT_RUNNER_ID, AgentType
from runners.tests.conversation_fixtures import through_the_door
from tests.fake_providers import Reply
from tests.timing import scaled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]


def calls(*tools) -> Reply:
    return Reply(text="", tool_calls=[
        {"id": f"call-{n}", "name": name, "arguments": json.dumps(args)}
        for n, (name, args) in enumerate(tools)])


@pytest.fixture
async def boxed_agent(make_agent_type, make_agent, make_model, project, openai_server):
    await sync_to_async(make_model)(openai_server, "box-model")
    agent_type = await sync_to_async(make_agent_type)(
        name="Worker", runner_id=LLM_AGENT_RUNNER_ID, primary_model="box-model",
        box_enabled=True)
    agent = await sync_to_async(make_agent)(project, agent_type)
    yield agent
    await box_server().stop()


async def ask(user, agent, text, conversation=None):
    return await through_the_door(user, agent, [Part(text=text)], conversation)


def tool_messages(openai_server) -> list[str]:
    return [m["content"] for m in openai_server.calls()[-1].body["messages"]
            if m["role"] == "tool"]


async def test_the_agent_runs_a_command_in_its_box_and_answers_with_its_output(
        boxed_agent, user, openai_server, admin_browser):
    openai_server.script(calls(("exec", {"command": "python3 -c 'print(6*7)'"})),
                         Reply(text="It is 42."))

    answer, conversation = await ask(user, boxed_agent, "What is six times seven? Compute it.")

    assert answer["status"] == "completed", answer
    offered = {tool["function"]["name"] for tool in openai_server.calls()[0].body["tools"]}
    assert {"exec", "read_file", "write_file", "list_files"} <= offered
    (result,) = tool_messages(openai_server)
    assert json.loads(result)["stdout"] == "42" and json.loads(result)["exit_code"] == 0
    page = (await sync_to_async(admin_browser.get)("/admin/runtime/")).content.decode()
    assert conversation.conversation_id in page and "each command confined" in page
    assert box_server().process is None  # LangHost's own backend needs no box server


async def test_what_the_agent_runs_in_its_box_finds_nothing_of_the_host(
        engine, boxed_agent, user, openai_server, settings, live_server):
    database = settings.DATABASES["default"]["NAME"]
    port = live_server.url.rsplit(":", 1)[1]
    probes = {
        "data dir": f"ls {settings.DATA_DIR}; cat {settings.DATA_DIR}/secret_key",
        "environments": "cat /proc/*/environ",
        "database": f"python3 -c \"import sqlite3; print(sqlite3.connect('file:{database}?mode=ro', "
                    "uri=True).execute('select email from accounts_user').fetchall())\"",
        "processes": "ls /proc | grep -c '^[0-9]'",
        "web port": f"python3 -c \"import urllib.request; print(urllib.request.urlopen("
                    f"'http://127.0.0.1:{port}/healthz').status)\"",
        "files": "ls /",
    }
    openai_server.script(calls(*[("exec", {"command": command}) for command in probes.values()]),
                         Reply(text="Looked."))

    answer, _ = await ask(user, boxed_agent, "Look around.")

    assert answer["status"] == "completed", answer
    seen = dict(zip(probes, map(json.loads, tool_messages(openai_server)), strict=True))
    assert all(seen[name]["exit_code"] != 0 and seen[name]["stdout"] == ""
               for name in ("data dir", "database", "web port")), seen
    assert "No such file" in seen["data dir"]["stderr"]
    # Only the box's own processes, with the box's own variables.
    names = {entry.split("=")[0] for entry in seen["environments"]["stdout"].split("\0") if entry}
    assert names <= {"PATH", "HOME", "TMPDIR", "LANG", "LANGBOT_BOX_WORKSPACE", "PWD", "SHLVL",
                     "_", "OLDPWD"}, names
    assert int(seen["processes"]["stdout"]) <= 4
    assert any(refusal in seen["web port"]["stderr"]  # no network, or only a loopback of its own
               for refusal in ("Network is unreachable", "Connection refused"))
    # The system's programs and libraries, and the Python installation wherever it is.
    python_tops = {Path(prefix).resolve().parts[1]
                   for prefix in (sys.prefix, sys.base_prefix, sys.executable)}
    assert set(seen["files"]["stdout"].split()) <= {
        "bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "root", "sbin", "tmp",
        "usr", "workspace"} | python_tops


async def test_a_command_past_its_memory_is_cut_off_and_says_so(boxed_agent, user,
                                                                openai_server, settings):
    settings.LANGHOST_BOX_MEMORY_MB = 64
    openai_server.script(calls(("exec", {"command": "python3 -c \"b = bytearray(200 << 20)\""})),
                         Reply(text="Too big."))

    await ask(user, boxed_agent, "Use a lot of memory.")

    (result,) = map(json.loads, tool_messages(openai_server))
    assert result["exit_code"] != 0
    assert result["stderr"].endswith("[cut off: the command reached its memory limit of 64 MB]")


async def test_a_path_out_of_the_workspace_is_refused_and_files_stay_in_their_conversation(
        boxed_agent, user, openai_server):
    openai_server.script(
        calls(("write_file", {"path": "notes.txt", "content": "tide at 7"}),
              ("read_file", {"path": "../../etc/passwd"}),
              ("read_file", {"path": "/etc/passwd"})),
        Reply(text="Noted."),
        calls(("list_files", {})), Reply(text="Nothing here."))

    await ask(user, boxed_agent, "Note the tide.")
    written, escaped, absolute = tool_messages(openai_server)
    await ask(user, boxed_agent, "What is in my workspace?")  # another conversation

    assert written == "Written."
    assert escaped.startswith("Error: ../../etc/passwd is outside the workspace")
    assert absolute.startswith("Error: /etc/passwd is outside the workspace")
    assert tool_messages(openai_server) == ["[]"]


async def test_what_the_filesystem_refuses_is_the_models_to_read_not_the_runs_end(
        boxed_agent, user, openai_server):
    openai_server.script(
        calls(("write_file", {"path": "notes.txt", "content": "x"}),
              ("write_file", {"path": "notes.txt/inner.txt", "content": "y"}),
              ("exec", {"command": "printf '\\377\\376' > blob.bin"}),
              ("read_file", {"path": "blob.bin"})),
        Reply(text="Done."))

    answer, _ = await ask(user, boxed_agent, "Write and read.")

    assert answer["status"] == "completed", answer
    written, nested, _, blob = tool_messages(openai_server)
    assert written == "Written." and nested.startswith("Error: ")
    assert blob == "(binary, 2 bytes, base64) //4="


async def test_a_command_past_its_time_is_cut_off_and_the_model_is_told(
        boxed_agent, user, openai_server, settings):
    settings.LANGHOST_BOX_EXEC_SECONDS = 1
    openai_server.script(calls(("exec", {"command": "sleep 30; echo never"})),
                         Reply(text="It took too long."))

    answer, _ = await ask(user, boxed_agent, "Wait a while.")

    assert answer["status"] == "completed"
    (result,) = tool_messages(openai_server)
    assert result.startswith("The command was cut off")
    assert json.loads(result.partition(". ")[2])["timed_out"] is True


async def test_a_box_server_killed_under_a_call_fails_that_call_and_the_next_run_starts_one(
        boxed_agent, user, openai_server, settings):
    settings.LANGHOST_BOX_BACKEND = "host-unsafe"
    openai_server.script(calls(("exec", {"command": "sleep 20"})), Reply(text="It broke."),
                         calls(("exec", {"command": "echo again"})), Reply(text="Again."))
    server = box_server()

    async def kill_when_running():
        while not (server.running and server.client is not None):
            await asyncio.sleep(0.05)
        await asyncio.sleep(scaled(0.5))
        first_pid = server.process.pid
        server.kill()
        return first_pid

    killer = asyncio.ensure_future(kill_when_running())
    broken, conversation = await ask(user, boxed_agent, "Sleep.")
    first_pid = await killer
    (failed,) = tool_messages(openai_server)
    again, _ = await ask(user, boxed_agent, "Echo.", conversation)

    assert broken["status"] == "completed"
    assert failed.startswith("Error: the box could not run the command")
    assert again["status"] == "completed"
    (echoed,) = [m for m in tool_messages(openai_server) if "again" in m]
    assert json.loads(echoed)["stdout"] == "again"
    assert server.process.pid != first_pid and server.starts == 2


async def test_a_type_that_allows_the_network_reaches_it_but_not_langhosts_own_ports(
        engine, boxed_agent, user, openai_server, settings):
    await AgentType.objects.filter(pk=boxed_agent.agent_type_id).aupdate(box_network=True)
    closed, opened = await _listener(), await _listener()
    settings.LANGHOST_SANDBOX_CLOSED_PORTS = [closed.sockets[0].getsockname()[1]]
    connect = ("python3 -c \"import socket; socket.create_connection(('127.0.0.1', {}), "
               "timeout=5); print('connected')\"")
    openai_server.script(calls(*[("exec", {"command": connect.format(server.sockets[0]
                                                                     .getsockname()[1])})
                                 for server in (opened, closed)]), Reply(text="Tried."))

    try:
        await ask(user, boxed_agent, "Connect.")
    finally:
        closed.close()
        opened.close()

    reached, refused = map(json.loads, tool_messages(openai_server))
    assert reached["stdout"] == "connected"
    assert refused["exit_code"] != 0 and "Permission denied" in refused["stderr"]


async def _listener():
    return await asyncio.start_server(lambda reader, writer: writer.close(), "127.0.0.1", 0)
