"""Plugins' `Tool` components: discovered through the runtime, stored, browsable, callable, and
called by runner plugins through the host."""

import json

import pytest
import pytest_asyncio
from asgiref.sync import sync_to_async
from django.contrib.admin.utils import quote

from ledger.models import AgentRunEvent, Transcript
from runners.execution.orchestrator import Orchestrator
from runners.models import ToolDescriptor
from runners.protocol import AgentBinding, AgentEventEnvelope
from runners.runtime.link import RuntimeLinkError, ToolNotFound
from runners.tests.conftest import serve_as_process_gateway
from tests.timing import scaled

pytestmark = [pytest.mark.processes, pytest.mark.asyncio(loop_scope="session"), pytest.mark.django_db(transaction=True)]

REVERSE = "plugin:e2e/tools-demo/reverse"
WORD_COUNT = "plugin:e2e/tools-demo/word_count"


@pytest_asyncio.fixture(loop_scope="session")
async def gateway(tools_gateway):
    await tools_gateway.discover(scaled(30))  # every test starts from an emptied database
    return tools_gateway


async def test_discovery_stores_each_tool_with_its_schema(gateway):
    reverse = await ToolDescriptor.objects.aget(pk=REVERSE)

    assert (reverse.name, reverse.plugin_author, reverse.plugin_name) == (
        "reverse", "e2e", "tools-demo")
    assert reverse.description == "Reverses the given text, character by character."
    assert reverse.parameters == {
        "type": "object", "required": ["text"],
        "properties": {"text": {"type": "string", "description": "The text to reverse."}}}
    assert reverse.available and reverse.last_seen_at is not None
    assert await ToolDescriptor.objects.filter(available=True).acount() == 3  # + needs-pyjokes


async def test_call_tool_answers_through_the_runtime(gateway):
    assert await gateway.call_tool("e2e", "tools-demo", "reverse", {"text": "stressed"},
                                   scaled(10)) == {"text": "desserts"}
    assert await gateway.call_tool("e2e", "tools-demo", "word_count",
                                   {"text": "one two  three"}, scaled(10)) == {"words": 3}


async def test_call_tool_refuses_a_tool_the_plugin_does_not_have(gateway):
    with pytest.raises(ToolNotFound):
        await gateway.call_tool("e2e", "tools-demo", "no_such_tool", {}, scaled(10))
    with pytest.raises(ToolNotFound):  # a tool of another plugin is not this plugin's
        await gateway.call_tool("e2e", "needs-pyjokes", "reverse", {"text": "x"}, scaled(10))


async def test_call_tool_reports_the_tools_error_and_its_timeout(gateway):
    with pytest.raises(RuntimeLinkError, match="KeyError"):
        await gateway.call_tool("e2e", "tools-demo", "reverse", {}, scaled(10))
    with pytest.raises(RuntimeLinkError, match="timed out"):
        await gateway.call_tool("e2e", "tools-demo", "reverse", {"text": "late"}, 0)


async def test_tools_of_a_vanished_plugin_turn_unavailable_and_are_kept(gateway):
    await ToolDescriptor.objects.acreate(pk="plugin:e2e/gone/old", name="old",
                                         plugin_author="e2e", plugin_name="gone")

    await gateway.discover(scaled(30))

    assert not (await ToolDescriptor.objects.aget(pk="plugin:e2e/gone/old")).available
    assert (await ToolDescriptor.objects.aget(pk=REVERSE)).available


async def test_tools_turn_unavailable_while_the_runtime_is_down(gateway):
    gateway._on_state_change("down", "test: runtime gone")
    await _background_done(gateway)

    assert await ToolDescriptor.objects.filter(available=True).acount() == 0
    assert await ToolDescriptor.objects.acount() == 3

    await gateway.discover(scaled(30))  # back: listed again
    assert (await ToolDescriptor.objects.aget(pk=REVERSE)).available


async def _background_done(gateway) -> None:
    """What the state change spawned has finished (the gateway's loops run on)."""
    for task in [task for task in gateway._tasks
                 if "forever" not in task.get_coro().__qualname__]:
        await task


async def test_tools_api_lists_them_to_signed_in_users_with_filters(gateway, user_client,
                                                                    anon_client):
    get = sync_to_async(user_client.get)
    await ToolDescriptor.objects.filter(pk=WORD_COUNT).aupdate(available=False)

    listed = (await get("/api/v1/tools")).json()
    mine = (await get("/api/v1/tools", {"plugin": "e2e/tools-demo"})).json()
    available = (await get("/api/v1/tools", {"available": "true",
                                             "plugin_name": "tools-demo"})).json()

    assert listed["pagination"]["total"] == 3
    assert [tool["id"] for tool in mine["data"]] == [REVERSE, WORD_COUNT]
    assert [tool["name"] for tool in available["data"]] == ["reverse"]
    assert available["data"][0]["plugin"] == "e2e/tools-demo"
    assert available["data"][0]["parameters"]["required"] == ["text"]
    assert (await sync_to_async(anon_client.get)("/api/v1/tools")).status_code == 401


async def test_admin_shows_tools_read_only(gateway, admin_browser):
    get = sync_to_async(admin_browser.get)
    changelist = (await get("/admin/runners/tooldescriptor/")).content.decode()
    page = await get(f"/admin/runners/tooldescriptor/{quote(REVERSE)}/change/")

    assert REVERSE in changelist and WORD_COUNT in changelist
    assert page.status_code == 200
    html = page.content.decode()
    assert "The text to reverse." in html and 'name="_save"' not in html
    assert (await get("/admin/runners/tooldescriptor/add/")).status_code == 403


# --- runner plugins calling tools through the host ---------------------------------------------

def tools_binding(runner: str, **config) -> AgentBinding:
    return AgentBinding(binding_id=f"tools-{runner}", runner_config=config,
                        runner_id=f"plugin:e2e/tools-demo/{runner}")


async def test_a_runner_plugin_calls_its_granted_tool_and_is_refused_the_others(gateway,
                                                                              monkeypatch):
    serve_as_process_gateway(monkeypatch, gateway)  # the host calls the tool through it
    event = AgentEventEnvelope(conversation_id="tool-user", input={"text": "stressed"})

    outcome = await Orchestrator(gateway).run_to_end(event, tools_binding("tool-user",
                                                                         tools=["reverse"]))

    assert outcome["status"] == "completed"
    (reply,) = [m for m in outcome["messages"] if m["type"] == "message.completed"]
    report = json.loads(reply["data"]["message"]["content"])
    # The caller sees the calls as the runner reported them; the host's records are not sent
    # again.
    seen = [m["type"] for m in outcome["messages"] if m["type"].startswith("tool.call.")]
    assert seen == ["tool.call.started", "tool.call.completed"] * 2
    assert report["granted"] == ["event_reply", "reverse"]
    assert report["reverse"] == {"ok": {"text": "desserts"}}
    assert report["reverse_detail"]["ok"]["parameters"]["required"] == ["text"]
    assert "not authorized" in report["word_count"]["sdk_refused"]
    assert "tool.not_granted" in report["word_count_raw"]["error"]
    # The host records the calls it made (the SDK also reports them as the runner's results).
    events = [(row.type, row.data_json) async for row in AgentRunEvent.objects.filter(
        run_id=outcome["run_id"], type__startswith="tool.call.", source="host",
    ).order_by("sequence")]
    assert [type_ for type_, _ in events] == ["tool.call.started", "tool.call.completed"]
    assert events[0][1]["parameters"] == {"text": "stressed"}
    assert events[1][1]["result"] == {"text": "desserts"} and events[1][1]["error"] is None


async def test_a_runner_replying_through_event_reply_answers_the_conversation(gateway):
    event = AgentEventEnvelope(conversation_id="replier", input={"text": "hello"})

    outcome = await Orchestrator(gateway).run_to_end(event, tools_binding("replier"))

    assert outcome["status"] == "completed"
    replies = [m for m in outcome["messages"] if m["type"] == "message.completed"]
    assert [m["data"]["message"]["content"] for m in replies] == ["replied: hello"]
    transcript = [(row.role, row.content) async for row in Transcript.objects.filter(
        conversation_id="replier").order_by("pk")]
    assert transcript == [("user", "hello"), ("assistant", "replied: hello")]
