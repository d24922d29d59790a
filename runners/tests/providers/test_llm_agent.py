"""`builtin:llm-agent`: persona, params and fallback reach a real (scripted) provider over HTTP;
agent trees hand turns over with transfer_to_agent; cancel and deadlines stop the upstream call."""

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async

from ledger.models import AgentRun, AgentRunEvent, ModelCall, RunStatus, Transcript
from runners.conversations import background
from runners.conversations import services as door
from runners.conversations.callers import Caller
from runners.conversations.selectors import visible_runs
from runners.execution.orchestrator import Orchestrator
from runners.models import LLM_AGENT_RUNNER_ID, SubAgent
from runners.tests.conversation_fixtures import (  # noqa: F401
    conversations_url,
    read_body,
    register_builtin,
)
from tests.fake_providers import Reply
from tests.timing import scaled

pytestmark = pytest.mark.django_db(transaction=True)

PERSONA = "You are a careful tax assistant. Answer briefly."


@pytest.fixture
def thinking_type(make_agent_type, make_model, openai_server):
    make_model(openai_server, "claude-3-opus", input_price_per_mtok=15, output_price_per_mtok=75)
    make_model(openai_server, "claude-3-sonnet", input_price_per_mtok=3, output_price_per_mtok=15)
    return make_agent_type(
        name="Taxes", runner_id=LLM_AGENT_RUNNER_ID, personality_prompt=PERSONA,
        primary_model="claude-3-opus", fallback_models=["claude-3-sonnet"],
        model_params={"temperature": 0.2, "max_tokens": 64})


@pytest.fixture
def thinking_agent(make_agent, project, thinking_type):
    return make_agent(project, thinking_type)


def open_conversation(client, agent) -> str:
    return client.post(conversations_url(agent), {}, format="json").json()["id"]


def send(client, agent, conversation, text="How much is VAT?", stream=False):
    url = f"{conversations_url(agent)}/{conversation}/messages" + ("?stream=1" if stream else "")
    response = client.post(url, {"text": text}, format="json")
    body = read_body(response).decode()
    if stream:
        return [json.loads(line) for line in body.splitlines()]
    return json.loads(body)


def test_the_agent_answers_through_its_fallback_with_persona_and_params(
        user_client, thinking_agent, openai_server):
    openai_server.script(Reply(status=500), Reply(text="VAT is 20% here.", input_tokens=40,
                                                  output_tokens=7))
    conversation = open_conversation(user_client, thinking_agent)

    frames = send(user_client, thinking_agent, conversation, stream=True)

    deltas = "".join(f["data"]["chunk"]["content"] for f in frames if f["type"] == "message.delta")
    assert deltas == "VAT is 20% here."
    assert frames[-1]["type"] == "run.finished"
    assert frames[-1]["reply"]["content"] == "VAT is 20% here."
    sent = openai_server.calls()[-1].body
    assert sent["messages"][0]["role"] == "system" and PERSONA in sent["messages"][0]["content"]
    assert sent["messages"][-1] == {"role": "user", "content": "How much is VAT?"}
    assert (sent["temperature"], sent["max_tokens"]) == (0.2, 64)
    calls = list(ModelCall.objects.order_by("id").values_list("model_name", "status"))
    assert calls == [("claude-3-opus", "error"), ("claude-3-sonnet", "ok")]
    run = AgentRun.objects.get(run_id=frames[-1]["run_id"])
    assert run.status == RunStatus.COMPLETED
    assert run.usage_json["total_tokens"] == 47


def test_a_model_name_nobody_registered_fails_the_run_at_once(
        user_client, make_agent_type, make_agent, project, openai_server):
    agent = make_agent(project, make_agent_type(runner_id=LLM_AGENT_RUNNER_ID,
                                                primary_model="gpt-nowhere"))

    body = send(user_client, agent, open_conversation(user_client, agent))

    assert body["status"] == "failed"
    assert body["status_reason"].startswith("model.unknown:")
    assert "gpt-nowhere" in body["status_reason"] and "/api/v1/models" in body["status_reason"]
    assert openai_server.calls() == []


def test_the_history_goes_with_each_message(user_client, thinking_agent, openai_server):
    conversation = open_conversation(user_client, thinking_agent)
    send(user_client, thinking_agent, conversation, "first")

    send(user_client, thinking_agent, conversation, "second")

    roles = [(m["role"], m["content"]) for m in openai_server.calls()[-1].body["messages"][1:]]
    assert roles == [("user", "first"), ("assistant", "Hello there!"), ("user", "second")]


# --- agent trees ----------------------------------------------------------------------------

def billing_tree(make_agent_type, make_agent, project, thinking_type, **flags):
    billing = make_agent_type(name="billing", runner_id=LLM_AGENT_RUNNER_ID,
                              description="Invoices and refunds",
                              personality_prompt="You are the billing desk.",
                              primary_model="claude-3-sonnet", **flags)
    SubAgent.objects.create(parent=thinking_type, child=billing)
    return make_agent(project, thinking_type)


TRANSFER = Reply(text="", tool_calls=[{"id": "call-1", "name": "transfer_to_agent",
                                       "arguments": '{"agent_name": "billing"}'}])


def offered(call) -> list[str]:
    tools = call.body.get("tools") or []
    return [name for tool in tools
            for name in tool["function"]["parameters"]["properties"]["agent_name"]["enum"]]


def test_transfer_to_agent_hands_the_turn_to_billing_and_keeps_it_there(
        user_client, make_agent_type, make_agent, project, thinking_type, openai_server):
    agent = billing_tree(make_agent_type, make_agent, project, thinking_type)
    openai_server.script(TRANSFER, Reply(text="Billing here: refund sent."))
    conversation = open_conversation(user_client, agent)

    body = send(user_client, agent, conversation, "Refund my invoice")

    assert (body["agent"], body["reply"]["content"]) == ("Taxes", "Billing here: refund sent.")
    first, second = openai_server.calls()
    assert (offered(first), offered(second)) == (["billing"], ["Taxes"])
    assert "billing desk" in second.body["messages"][0]["content"]
    events = list(AgentRunEvent.objects.filter(run_id=body["run_id"]).values_list("type",
                                                                                 flat=True))
    assert events[:2] == ["tool.call.started", "tool.call.completed"]
    assert Transcript.objects.filter(role="assistant").get().author == "billing"

    next_body = send(user_client, agent, conversation, "And the other one?")

    assert next_body["agent"] == "billing"
    assert "billing desk" in openai_server.calls()[-1].body["messages"][0]["content"]


def transfer_to(name: str) -> Reply:
    return Reply(text="", tool_calls=[{"id": "call-1", "name": "transfer_to_agent",
                                       "arguments": json.dumps({"agent_name": name})}])


def test_a_transfer_names_its_agent_as_people_write_names_or_fails_saying_so(
        user_client, make_agent_type, make_agent, project, thinking_type, openai_server):
    agent = billing_tree(make_agent_type, make_agent, project, thinking_type)
    openai_server.script(transfer_to("  Billing "), Reply(text="Billing here."),
                         transfer_to("the manager"))

    handed = send(user_client, agent, open_conversation(user_client, agent), "Refund it")
    failed = send(user_client, agent, open_conversation(user_client, agent), "Escalate")

    assert (handed["status"], handed["reply"]["content"]) == ("completed", "Billing here.")
    assert Transcript.objects.filter(role="assistant").get().author == "billing"
    assert failed["status"] == "failed"
    assert failed["status_reason"].startswith("transfer.unknown_agent:")
    assert "'the manager'" in failed["status_reason"] and "billing" in failed["status_reason"]


def test_billing_that_disallows_transfer_to_parent_is_not_offered_it(
        user_client, make_agent_type, make_agent, project, thinking_type, openai_server):
    agent = billing_tree(make_agent_type, make_agent, project, thinking_type,
                         disallow_transfer_to_parent=True)
    openai_server.script(TRANSFER, Reply(text="Billing here."))

    send(user_client, agent, open_conversation(user_client, agent), "Refund my invoice")

    assert offered(openai_server.calls()[-1]) == []


# --- stopping -------------------------------------------------------------------------------

async def _prepared(user, agent, timeout=None):
    return await sync_to_async(door.prepare_agent_run)(
        Caller(user), agent_id=agent.pk, event_input={"text": "Tell me a long story"},
        timeout=timeout)


async def test_cancelling_mid_stream_closes_the_upstream_request(
        user, thinking_agent, openai_server):
    openai_server.script(Reply(text="Once upon a time " * 20, stall_after=2))
    prepared = await _prepared(user, thinking_agent)

    async def consume():
        return [m async for m in door.execute(prepared)]

    running = asyncio.ensure_future(consume())
    while not await AgentRunEvent.objects.filter(run_id=prepared.run_id,
                                                 type="message.delta").aexists():
        await asyncio.sleep(0.02)
    await Orchestrator.cancel(prepared.run_id, "enough")
    await asyncio.wait_for(running, scaled(5))

    assert await openai_server.wait_closed(scaled(1))
    run = await AgentRun.objects.aget(run_id=prepared.run_id)
    assert (run.status, run.status_reason) == (RunStatus.CANCELLED, "enough")


async def test_a_background_run_is_running_in_the_ledger_while_its_model_thinks(
        user, thinking_agent, openai_server):
    openai_server.script(Reply(stall=True))
    prepared = await _prepared(user, thinking_agent)

    started = await background.start_in_background(prepared)

    assert started["status"] == RunStatus.RUNNING
    run = await AgentRun.objects.aget(run_id=prepared.run_id)
    assert run.status == RunStatus.RUNNING  # seen by the admin, the lists and the reaper
    listed = await sync_to_async(lambda: list(visible_runs(user).filter(
        status=RunStatus.RUNNING).values_list("run_id", flat=True)))()
    assert listed == [prepared.run_id]
    while not openai_server.calls():  # the model has the question and has not answered
        await asyncio.sleep(0.02)
    await Orchestrator.cancel(prepared.run_id, "enough")
    while not (await AgentRun.objects.aget(run_id=prepared.run_id)).is_terminal:
        await asyncio.sleep(0.02)


async def test_a_deadline_shorter_than_a_stalled_call_ends_the_run_timeout(
        user, thinking_agent, openai_server):
    openai_server.script(Reply(stall=True))
    prepared = await _prepared(user, thinking_agent, timeout=0.5)

    [_ async for _ in door.execute(prepared)]

    run = await AgentRun.objects.aget(run_id=prepared.run_id)
    assert run.status == RunStatus.TIMEOUT
    assert await openai_server.wait_closed(scaled(1))


# --- runners that only stream deltas --------------------------------------------------------

def test_a_runner_that_only_streams_deltas_still_answers(
        user_client, builtin, make_agent_type, make_agent, project):
    async def deltas_only(context):
        for n, piece in enumerate(["Hel", "lo ", "world"], start=1):
            yield {"run_id": context["run_id"], "type": "message.delta", "sequence": n,
                   "data": {"chunk": {"role": "assistant", "content": piece}}}
        yield {"run_id": context["run_id"], "type": "run.completed", "sequence": 4,
               "data": {"finish_reason": "stop"}}

    agent = make_agent(project, make_agent_type(runner_id=builtin("builtin:deltas", deltas_only)))

    body = send(user_client, agent, open_conversation(user_client, agent))

    assert body["reply"]["content"] == "Hello world"
    assert Transcript.objects.get(role="assistant").content == "Hello world"


def test_deltas_then_a_message_deliver_that_message_once_without_a_conversation(
        user_client, builtin, make_agent_type, make_agent, project):
    async def deltas_then_message(context):
        run_id = context["run_id"]
        yield {"run_id": run_id, "type": "message.delta", "sequence": 1,
               "data": {"chunk": {"role": "assistant", "content": "Hi"}}}
        yield {"run_id": run_id, "type": "message.completed", "sequence": 2,
               "data": {"message": {"role": "assistant", "content": "Hi"}}}
        yield {"run_id": run_id, "type": "run.completed", "sequence": 3,
               "data": {"finish_reason": "stop"}}

    agent = make_agent(project, make_agent_type(
        runner_id=builtin("builtin:deltas-then-message", deltas_then_message)))

    response = user_client.post("/api/v1/runs", {"agent_id": str(agent.pk),
                                                 "input": {"text": "x"}}, format="json")

    types = [m["type"] for m in json.loads(read_body(response))["messages"]]
    assert types == ["message.delta", "message.completed"]


def test_a_long_message_is_cut_on_pages_with_a_marker_but_reaches_the_model_whole(
        user_client, thinking_agent, openai_server):
    long_text = "tax " * 1500  # 6,000 characters
    openai_server.script(Reply(text="Noted."), Reply(text="Still noted."))
    conversation = open_conversation(user_client, thinking_agent)

    send(user_client, thinking_agent, conversation, text=long_text)
    send(user_client, thinking_agent, conversation, text="And now?")

    entry = Transcript.objects.filter(role="user").order_by("id").first()
    assert entry.content.startswith("tax tax") and entry.content.endswith(
        "[cut: 2,000 more characters, kept whole in the entry's message]")
    assert entry.full_text == long_text
    users = [m["content"] for m in openai_server.calls()[-1].body["messages"]
             if m["role"] == "user"]
    assert users == [long_text, "And now?"]
