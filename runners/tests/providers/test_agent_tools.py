"""Agents that act: the built-in LLM agent calls its agent type's MCP tools (the fixture
server over stdio), LangBot's `call_tool` refuses tools the run was not granted, and a failing
tool is the model's to handle, not the run's end."""

import json
import os
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator

from accounts.tokens import token_pair
from langhost.asgi import application
from ledger.models import AgentRun, AgentRunEvent, Conversation, RunStatus
from runners.grants.tools import tool_grants
from runners.hostapi import tool_api
from runners.models import LLM_AGENT_RUNNER_ID, McpServer, RunnerDescriptor
from runners.protocol import AgentBinding
from runners.runtime.host_actions import HostError
from runners.tests.conversation_fixtures import conversations_url, read_body
from runners.tests.tools.conftest import SERVER, close_process_sessions  # noqa: F401
from tests.fake_providers import Reply
from tests.timing import scaled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

ADD = Reply(text="", tool_calls=[{"id": "call-add", "name": "add",
                                  "arguments": '{"a": 2, "b": 3}'}])


@pytest.fixture
def calc(db):
    return McpServer.objects.create(name="calc", command=sys.executable, args=[str(SERVER)])


@pytest.fixture
def calc_agent(calc, make_agent_type, make_agent, make_model, project, openai_server):
    make_model(openai_server, "gpt-tools")
    agent_type = make_agent_type(name="Calculator", runner_id=LLM_AGENT_RUNNER_ID,
                                 primary_model="gpt-tools", mcp_servers=["calc"])
    return make_agent(project, agent_type)


def ask(client, agent, text="What is 2 + 3?") -> dict:
    conversation = client.post(conversations_url(agent), {}, format="json").json()["id"]
    response = client.post(f"{conversations_url(agent)}/{conversation}/messages",
                           {"text": text}, format="json")
    return json.loads(read_body(response).decode())


def tool_events(run_id: str) -> list[tuple[str, dict]]:
    return list(AgentRunEvent.objects.filter(run_id=run_id, type__startswith="tool.call.")
                .order_by("sequence").values_list("type", "data_json"))


def tool_messages(call) -> list[dict]:
    return [m for m in call.body["messages"] if m["role"] == "tool"]


def test_the_agent_calls_its_mcp_tool_and_answers_with_the_result(
        user_client, calc_agent, openai_server):
    openai_server.script(ADD, Reply(text="2 + 3 is 5."))

    body = ask(user_client, calc_agent)

    assert body["status"] == "completed"
    first, second = openai_server.calls()
    offered = {tool["function"]["name"]: tool["function"] for tool in first.body["tools"]}
    assert offered["add"]["parameters"]["required"] == ["a", "b"]
    assert tool_messages(second) == [{"role": "tool", "tool_call_id": "call-add",
                                      "content": "5"}]
    assert second.body["messages"][-2]["tool_calls"][0]["function"]["name"] == "add"
    run = AgentRun.objects.get(run_id=body["run_id"])
    assert run.status == RunStatus.COMPLETED
    grant = next(t for t in run.authorization()["resources"]["tools"]
                 if t["tool_name"] == "add")
    assert (grant["source"], grant["source_id"], grant["operations"]) == (
        "mcp", "calc", ["detail", "call"])
    (started_type, started), (completed_type, completed) = tool_events(body["run_id"])
    assert (started_type, completed_type) == ("tool.call.started", "tool.call.completed")
    assert started["parameters"] == {"a": 2, "b": 3}
    assert completed["result"]["text"] == "5" and completed["error"] is None
    assert body["reply"]["content"] == "2 + 3 is 5."


def test_a_tool_error_goes_back_to_the_model_and_the_run_completes(
        user_client, calc_agent, openai_server):
    openai_server.script(
        Reply(text="", tool_calls=[{"id": "call-fail", "name": "fail",
                                    "arguments": '{"message": "the abacus broke"}'}]),
        Reply(text="", tool_calls=[{"id": "call-nope", "name": "rm_rf", "arguments": "{}"}]),
        Reply(text="Sorry, I cannot calculate now."))

    body = ask(user_client, calc_agent)

    assert body["status"] == "completed"
    failed, refused = (tool_messages(call)[-1] for call in openai_server.calls()[1:])
    assert failed["content"].startswith("Error:") and "the abacus broke" in failed["content"]
    assert refused["content"] == "Error: tool 'rm_rf' is not available to you"
    errors = [data["error"] for type_, data in tool_events(body["run_id"])
              if type_ == "tool.call.completed"]
    assert "the abacus broke" in errors[0] and "rm_rf" in errors[1]


def test_a_model_that_never_stops_calling_tools_fails_the_run(
        user_client, calc_agent, openai_server):
    openai_server.default = ADD

    body = ask(user_client, calc_agent)

    assert body["status"] == "failed"
    assert body["status_reason"].startswith("tool.steps_exceeded:")
    assert len(openai_server.calls()) == 11


def call(name: str, arguments: str = "{}") -> Reply:
    return Reply(text="", tool_calls=[{"id": f"call-{name}", "name": name,
                                       "arguments": arguments}])


def test_killing_the_mcp_server_mid_run_fails_only_that_call_and_the_next_run_restarts_it(
        user_client, calc_agent, openai_server):
    openai_server.script(call("pid"), Reply(text="Noted."))
    ask(user_client, calc_agent, "Which pid?")
    server_pid = int(tool_messages(openai_server.calls()[-1])[-1]["content"])
    openai_server.script(call("sleep", '{"seconds": 600}'), Reply(text="The calculator died."))

    with ThreadPoolExecutor(1) as pool:
        asked = pool.submit(ask, user_client, calc_agent, "Sleep on it")
        wait_for(lambda: AgentRunEvent.objects.filter(
            type="tool.call.started", data_json__tool_name="sleep").exists())
        os.kill(server_pid, signal.SIGKILL)
        body = asked.result(timeout=scaled(30))

    assert body["status"] == "completed" and body["reply"]["content"] == "The calculator died."
    lost = tool_messages(openai_server.calls()[-1])[-1]["content"]
    assert lost.startswith("Error:") and "sleep" in lost
    openai_server.script(call("pid"), Reply(text="Back."))
    assert ask(user_client, calc_agent, "Which pid now?")["status"] == "completed"
    assert int(tool_messages(openai_server.calls()[-1])[-1]["content"]) not in (server_pid, 0)


def wait_for(condition, seconds: float = 10) -> None:
    deadline = time.monotonic() + scaled(seconds)
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.05)


# --- grants and LangBot's tool actions --------------------------------------------------------

def plugin_runner(**manifest) -> RunnerDescriptor:
    return RunnerDescriptor(id="plugin:e2e/agent/tools", runner_name="tools",
                            source=RunnerDescriptor.Source.PLUGIN, **manifest)


def binding(**config) -> AgentBinding:
    return AgentBinding(binding_id="tools", runner_id="plugin:e2e/agent/tools",
                        runner_config=config)


def test_a_plugin_runner_gets_tools_only_when_its_manifest_asks_for_them(calc):
    calc.tools = [{"name": "add", "description": "Add two numbers.",
                   "inputSchema": {"type": "object"}}]
    calc.save()
    asks = plugin_runner(permissions={"tools": ["call"]}, capabilities={"tool_calling": True})
    grants = async_to_sync(tool_grants)(binding(mcp_servers=["calc", "nowhere"]), asks)
    assert [grant["tool_name"] for grant in grants] == ["event_reply", "add"]
    assert grants[1] == {"tool_name": "add", "tool_type": "mcp", "description": "Add two numbers.",
                         "operations": ["call"], "parameters": {"type": "object"},
                         "source": "mcp", "source_id": "calc"}
    # Calling tools without the tool-calling capability: only the event tool, to reply with.
    replier = plugin_runner(permissions={"tools": ["call"]})
    assert [grant["tool_name"] for grant in async_to_sync(tool_grants)(
        binding(mcp_servers=["calc"]), replier)] == ["event_reply"]
    assert async_to_sync(tool_grants)(binding(mcp_servers=["calc"]), plugin_runner(
        capabilities={"tool_calling": True})) == []


def test_a_policys_allowed_tool_names_are_the_only_tools_granted(calc):
    calc.tools = [{"name": name, "description": name, "inputSchema": {"type": "object"}}
                  for name in ("add", "echo", "fail")]
    calc.save()
    asks = plugin_runner(permissions={"tools": ["call"]}, capabilities={"tool_calling": True})
    policy = AgentBinding(binding_id="tools", runner_id="plugin:e2e/agent/tools",
                          runner_config={"mcp_servers": ["calc"]},
                          resource_policy={"allowed_tool_names": ["echo"]})

    grants = async_to_sync(tool_grants)(policy, asks)

    # event_reply is how the run answers: not a tool a policy withholds.
    assert [grant["tool_name"] for grant in grants] == ["event_reply", "echo"]


def host_call(action: str, run_id: str, tool_name: str, **data) -> dict:
    return async_to_sync(tool_api.handle)(action, {
        "run_id": run_id, "caller_plugin_identity": "e2e/agent", "tool_name": tool_name,
        **data}, None)


@pytest.fixture
def plugin_run(calc):
    grant = {"tool_name": "add", "tool_type": "mcp", "description": "Add two numbers.",
             "operations": ["detail", "call"], "parameters": {"type": "object"},
             "source": "mcp", "source_id": "calc"}
    return AgentRun.objects.create(
        run_id="run-tools", event_id="evt-tools", runner_id="plugin:e2e/agent/tools",
        status=RunStatus.RUNNING, authorization_json={
            "plugin_identity": "e2e/agent", "resources": {"models": [], "tools": [grant]}})


def test_call_tool_answers_granted_tools_and_refuses_the_others(plugin_run):
    detail = host_call("get_tool_detail", "run-tools", "add")
    assert detail == {"tool": {"name": "add", "description": "Add two numbers.",
                               "parameters": {"type": "object"}}}
    answer = host_call("call_tool", "run-tools", "add", parameters={"a": 2, "b": 3})
    # LangBot's content list, in an object (the SDK checks a traced call's result is one).
    assert answer["result"]["content"] == [{"type": "text", "text": "5"}]

    for action in ("call_tool", "get_tool_detail"):
        with pytest.raises(HostError) as refused:
            host_call(action, "run-tools", "echo", parameters={"text": "hi"})
        assert refused.value.code == "tool.not_granted"
        assert "tool.not_granted" in str(refused.value) and "'echo'" in str(refused.value)


def test_an_mcp_answers_images_and_structured_content_reach_a_plugin_as_content_elements():
    image = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
    resource = {"type": "resource_link", "uri": "file:///report.csv", "name": "report"}

    assert tool_api.content_elements({"text": "", "structuredContent": {"sum": 5},
                                      "content": [image, resource]}) == [
        {"type": "text", "text": '{"sum": 5}'},
        {"type": "image_base64", "image_base64": "data:image/png;base64,iVBORw0KGgo="},
        {"type": "text", "text": json.dumps(resource)},
    ]


def test_the_message_stream_shows_the_tool_call_between_the_runs_start_and_its_reply(
        user_client, calc_agent, openai_server):
    openai_server.script(ADD, Reply(text="2 + 3 is 5."))
    conversation = user_client.post(conversations_url(calc_agent), {}, format="json").json()["id"]

    response = user_client.post(
        f"{conversations_url(calc_agent)}/{conversation}/messages?stream=1",
        {"text": "What is 2 + 3?"}, format="json")
    frames = [json.loads(line) for line in read_body(response).decode().splitlines()]

    types = [frame["type"] for frame in frames]
    assert types[:3] == ["run.started", "tool.call.started", "tool.call.completed"]
    assert types[-1] == "run.finished"
    started, completed = frames[1], frames[2]
    assert (started["sequence"], completed["sequence"]) == (1, 2)
    assert started["data"]["tool_name"] == "add"
    assert started["data"]["parameters"] == {"a": 2, "b": 3}
    assert completed["data"]["result"]["text"] == "5"


async def test_the_conversation_socket_shows_the_tool_call_as_it_happens(
        user, calc_agent, openai_server):
    openai_server.script(ADD, Reply(text="2 + 3 is 5."))
    conversation = await Conversation.objects.acreate(
        conversation_id="calc-socket", client_id="calc-socket", project_id=str(
            calc_agent.project_id), agent_id=str(calc_agent.pk), user_id=str(user.pk))
    token = await sync_to_async(lambda: token_pair(user)["access_token"])()
    socket = WebsocketCommunicator(
        application, f"/ws/conversations/{conversation.conversation_id}/?token={token}")
    assert (await socket.connect(timeout=scaled(1)))[0]
    await socket.receive_json_from(timeout=scaled(1))  # ready

    await socket.send_json_to({"type": "message", "text": "What is 2 + 3?"})
    frames = []
    while not frames or frames[-1].get("type") != "run.finished":
        frames.append(await socket.receive_json_from(timeout=scaled(20)))
    await socket.disconnect()

    direct = [frame["type"] for frame in frames if frame["type"] != "run.event"]
    assert direct[:3] == ["run.started", "tool.call.started", "tool.call.completed"]


def test_the_conversation_page_shows_the_tool_calls_above_the_reply(
        user_client, admin_browser, calc_agent, openai_server):
    openai_server.script(ADD, Reply(text="2 + 3 is 5."))
    body = ask(user_client, calc_agent)
    conversation = Conversation.objects.get(conversation_id=body["conversation_id"])

    page = admin_browser.get(f"/admin/ledger/conversation/{conversation.pk}/change/")

    html = page.content.decode()
    assert 'add({&quot;a&quot;: 2, &quot;b&quot;: 3})</code> → <code>' in html
    assert html.index("add({") < html.index("2 + 3 is 5.")
