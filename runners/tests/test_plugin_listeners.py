"""A plugin's `EventListener`, told of a run's events as LangBot tells it: the message before
the runner (it may answer in the runner's place or rewrite what the runner reads), the
built-in agent's prompt (it may change it) and each reply (it may replace or withhold it).
Each call is recorded on the run; a listener that fails or stalls is recorded and the run
goes on. Real runtime, fixture plugin `e2e__listeners`."""

import asyncio
import contextlib

import pytest
import pytest_asyncio
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from ledger.models import Transcript
from ledger.selectors import runs as readers
from runners.conversations.input import Part
from runners.execution import listeners
from runners.models import (
    LLM_AGENT_RUNNER_ID,
    AgentInstance,
    AgentType,
    Binding,
    PluginInstallation,
)
from runners.plugins import events
from runners.runtime.worker import ChannelGateway, RuntimeWorkerConsumer, serve
from runners.tests.conversation_fixtures import through_the_door
from runners.tests.providers.conftest import make_model  # noqa: F401 (a fixture)
from tests.fake_providers import Reply, openai_server  # noqa: F401 (a fixture)
from tests.timing import scaled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

PLUGIN = "e2e/listeners"
PREFIX = "Prefixed by the e2e/listeners plugin."


@pytest_asyncio.fixture
async def listeners_gateway(own_gateway):
    gateway = await own_gateway("e2e__listeners")
    await gateway.discover(scaled(30))
    return gateway


async def echo_agent(project, **fields) -> AgentInstance:
    """An agent whose runner is the built-in echo (`echo: <text>`)."""
    agent_type = await AgentType.objects.acreate(name="Echoer", slug="echoer", **fields)
    return await AgentInstance.objects.acreate(name="Echo", project=project, agent_type=agent_type)


async def say(user, agent, text: str, conversation=None) -> tuple[dict, list[str]]:
    outcome, _ = await through_the_door(user, agent, [Part(text=text)], conversation)
    return outcome, [message["data"]["message"]["content"] for message in outcome["messages"]
                     if message["type"] == "message.completed"]


async def calls(run_id: str) -> list[dict]:
    """Each listener call recorded on the run."""
    return [event["data"] for event in await readers.run_events(run_id)
            if event["type"] == listeners.EVENT_TYPE]


async def heard(run_id: str) -> list[tuple[str, str]]:
    """`(event, outcome)` of each listener call recorded on the run."""
    return [(call["event"], call["outcome"]) for call in await calls(run_id)]


async def test_a_listener_answers_in_the_runners_place_or_rewrites_its_message(
        listeners_gateway, user, project):
    agent = await echo_agent(project)

    intercepted, answer = await say(user, agent, "intercept this")
    rewritten, echoed = await say(user, agent, "rewrite quietly")
    plain, untouched = await say(user, agent, "hello")

    assert (intercepted["status"], answer) == ("completed", ["intercepted: intercept this"])
    assert await heard(intercepted["run_id"]) == [("PersonNormalMessageReceived", "prevented")]
    assert echoed == ["echo: QUIETLY"]
    assert await heard(rewritten["run_id"]) == [("PersonNormalMessageReceived", "changed"),
                                                ("NormalMessageResponded", "handled")]
    assert untouched == ["echo: hello"]
    installation = await PluginInstallation.objects.aget(author="e2e", name="listeners")
    assert installation.listens_to_events


async def test_a_listener_replaces_or_withholds_a_reply_before_it_is_delivered(
        listeners_gateway, user, project):
    agent = await echo_agent(project)

    replaced, said = await say(user, agent, "something forbidden")
    withheld, nothing = await say(user, agent, "a secret")

    assert (replaced["status"], said) == ("completed", ["[a reply was replaced by a listener]"])
    transcript = [row.content async for row in Transcript.objects.filter(
        run_id=replaced["run_id"], role="assistant")]
    assert transcript == ["[a reply was replaced by a listener]"]
    assert (withheld["status"], nothing) == ("completed", [])
    assert await heard(withheld["run_id"]) == [("PersonNormalMessageReceived", "handled"),
                                               ("NormalMessageResponded", "prevented")]


async def test_a_listener_replies_through_the_host_and_keeps_query_variables(
        listeners_gateway, user, project):
    agent = await echo_agent(project)

    _, greetings = await say(user, agent, "greet")
    _, remembered = await say(user, agent, "remember the tide")
    _, forgotten = await say(user, agent, "something forbidden")

    assert greetings == ["hello from the listener", "echo: greet"]
    assert remembered == ["the listener heard 'remember the tide'"]
    # A run's variables are its own: the next run's listener finds none.
    assert forgotten == ["[a reply was replaced by a listener]"]


async def test_a_listener_that_fails_or_stalls_is_recorded_and_the_run_completes(
        listeners_gateway, user, project, monkeypatch):
    monkeypatch.setattr(listeners, "LISTENER_TIMEOUT_SECONDS", scaled(1.0))
    agent = await echo_agent(project)

    crashed, crash_reply = await say(user, agent, "crash")
    stalled, stall_reply = await say(user, agent, "stall")

    assert (crashed["status"], crash_reply) == ("completed", ["echo: crash"])
    assert (stalled["status"], stall_reply) == ("completed", ["echo: stall"])
    failures = [call for run in (crashed, stalled) for call in await calls(run["run_id"])
                if call["outcome"] == "failed"]
    assert {failure["plugin"] for failure in failures} == {PLUGIN}
    errors = " | ".join(failure["error"] for failure in failures)
    assert "the listener broke" in errors and "timed out" in errors.lower(), errors


async def test_an_agent_type_chooses_which_plugins_listen(listeners_gateway, user, project,
                                                         superuser_client):
    deaf = await echo_agent(project, event_plugins=[])

    outcome, replies = await say(user, deaf, "intercept this")

    assert replies == ["echo: intercept this"]
    assert await heard(outcome["run_id"]) == []
    answer = await sync_to_async(superuser_client.patch)(
        f"/api/v1/agent-types/{deaf.agent_type_id}", {"event_plugins": ["nobody/here"]},
        format="json")
    assert answer.status_code == 400
    assert "nobody/here" in answer.json()["errors"]["event_plugins"][0]
    # A binding of its own for the agent leaves the choice to its type.
    await Binding.objects.acreate(binding_id="deaf-echo", scope_type="agent",
                                  scope_id=str(deaf.pk), runner_id="builtin:echo")
    _, bound = await say(user, deaf, "intercept this")
    assert bound == ["echo: intercept this"]
    answer = await sync_to_async(superuser_client.patch)(
        f"/api/v1/agent-types/{deaf.agent_type_id}", {"event_plugins": [PLUGIN]}, format="json")
    assert answer.status_code == 200 and answer.json()["event_plugins"] == [PLUGIN]
    _, replies = await say(user, deaf, "intercept that")
    assert replies == ["intercepted: intercept that"]
    answer = await sync_to_async(superuser_client.patch)(
        f"/api/v1/agent-types/{deaf.agent_type_id}", {"event_plugins": None}, format="json")
    assert answer.status_code == 200 and answer.json()["event_plugins"] is None


@pytest.fixture
async def talker(project, make_model, openai_server):  # noqa: F811 (fixtures)
    """An agent of the built-in LLM agent, its model scripted; its replies stream."""
    await sync_to_async(make_model)(openai_server, "listened-model")
    agent_type = await AgentType.objects.acreate(
        name="Talker", slug="talker", runner_id=LLM_AGENT_RUNNER_ID,
        primary_model="listened-model", personality_prompt="You are terse.")
    return await AgentInstance.objects.acreate(name="Talk", project=project,
                                               agent_type=agent_type)


async def test_a_listener_changes_the_built_in_agents_prompt_and_message(
        listeners_gateway, user, talker, openai_server):  # noqa: F811 (fixtures)
    openai_server.script(Reply(text="Hello there."), Reply(text="Fine."))

    greeted, greeting = await say(user, talker, "hi")
    await say(user, talker, "rewrite quietly")

    sent = openai_server.calls()[0].body["messages"]
    assert sent[0] == {"role": "system", "content": PREFIX}
    assert sent[1]["role"] == "system" and "You are terse." in sent[1]["content"]
    assert sent[-1] == {"role": "user", "content": "hi"}
    assert greeting == ["Hello there."]
    assert ("PromptPreProcessing", "changed") in await heard(greeted["run_id"])
    assert openai_server.calls()[1].body["messages"][-1] == {"role": "user",
                                                             "content": "QUIETLY"}


async def test_a_streamed_reply_is_replaced_or_withheld_whole(
        listeners_gateway, user, talker, openai_server):  # noqa: F811 (fixtures)
    openai_server.script(Reply(text="That is forbidden."), Reply(text="Here is a secret."))

    replaced, said = await say(user, talker, "tell me")
    withheld, nothing = await say(user, talker, "and now")

    assert said == ["[a reply was replaced by a listener]"]
    assert (withheld["status"], nothing) == ("completed", [])
    transcript = [row.content async for row in Transcript.objects.filter(
        run_id__in=[replaced["run_id"], withheld["run_id"]], role="assistant")]
    assert transcript == ["[a reply was replaced by a listener]"]


async def test_listeners_and_pages_answer_through_a_runtime_worker(own_gateway, monkeypatch):
    gateway = await own_gateway("e2e__listeners", "langhost__examples")
    await gateway.discover(scaled(30))
    # The worker's consumer answers on the default layer, and serving sets its class: what a
    # session's worker of another test had is put back afterwards.
    for name in ("gateway", "own_channel"):
        monkeypatch.setattr(RuntimeWorkerConsumer, name, getattr(RuntimeWorkerConsumer, name))
    layer = get_channel_layer()
    worker = asyncio.ensure_future(serve(gateway, layer))
    try:
        remote = ChannelGateway(layer)
        context = events.message_received({"run_id": "r-1", "input": {"text": "intercept"}})
        heard_there = await remote.emit_event(PLUGIN, context, scaled(10))
        answered = await remote.page_api("langhost/examples", "status", "/echo", "GET", [1])
        html = await remote.plugin_file("langhost/examples",
                                        "components/pages/status/status.html")
        missing = await remote.plugin_file("langhost/examples", "main.py")
    finally:
        worker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await worker

    assert events.prevented(heard_there["event_context"])
    assert answered == {"data": {"method": "GET", "received": [1]}, "error": None}
    assert b"page-sdk.js" in html[0] and html[1] == "text/html"
    assert missing is None
