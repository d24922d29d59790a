"""Calls through the official SDKs to fake providers over real HTTP: what reaches the provider,
what comes back in the SDK's shapes, and how each call is recorded."""

import asyncio
import json
import time
from contextlib import aclosing
from decimal import Decimal

import pytest
from asgiref.sync import sync_to_async
from langbot_plugin.api.entities.builtin.provider.message import (
    LLMInvokeResult,
    LLMStreamEvent,
    Message,
)
from langbot_plugin.api.entities.builtin.resource.tool import LLMTool

from ledger.models import ModelCall
from runners.providers.calls import CallInfo, count_tokens, invoke, invoke_embedding, stream
from runners.providers.errors import ProviderError
from runners.tests.providers.conftest import API_KEY
from tests.fake_providers import Reply, bag_of_words
from tests.timing import scaled

pytestmark = pytest.mark.django_db(transaction=True)

CALL = CallInfo(run_id="run-1", agent_id="agent-1", project_id="project-1", caller="acme/bot")
CONVERSATION = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": [{"type": "text", "text": "What is the weather in Paris?"}]},
]
WEATHER = {"id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'}


async def _noop(**kwargs):
    return None


TOOL = LLMTool(name="get_weather", human_desc="Weather", description="The weather of a city.",
               parameters={"type": "object", "properties": {"city": {"type": "string"}}},
               func=_noop)


async def calls() -> list[ModelCall]:
    return [call async for call in ModelCall.objects.order_by("id")]


async def collect(events) -> list[dict]:
    async with aclosing(events):
        return [event async for event in events]


async def test_invoke_returns_the_sdk_message_and_usage_and_records_the_call(server, model):
    server.script(Reply(text="Sunny.", input_tokens=1000, output_tokens=200, cached_tokens=400))

    message, usage = await invoke(model, CONVERSATION, params={"temperature": 0.2}, call=CALL)

    result = LLMInvokeResult.model_validate({"message": message, "usage": usage})
    assert result.message.role == "assistant"
    assert result.message.content == "Sunny."
    assert result.message.provider_specific_fields == {"finish_reason": "stop"}
    assert usage == {"prompt_tokens": 1000, "completion_tokens": 200, "total_tokens": 1200,
                     "cached_tokens": 400}
    [row] = await calls()
    assert (row.run_id, row.agent_id, row.project_id, row.caller) == (
        "run-1", "agent-1", "project-1", "acme/bot")
    assert (row.model_name, row.upstream_model, row.operation, row.attempt, row.status) == (
        model.name, model.upstream_model, "invoke", 1, "ok")
    assert row.provider_name == model.provider.name
    assert (row.input_tokens, row.output_tokens, row.cached_tokens) == (1000, 200, 400)
    # 600 uncached x 2 + 400 cached x 1 + 200 output x 8, per million tokens
    assert row.cost == Decimal("0.0032")
    assert row.latency_ms >= 0 and row.first_token_ms is not None


async def test_openai_request_carries_messages_tools_and_params(openai_server, openai_model):
    await invoke(openai_model, CONVERSATION, tools=[TOOL],
                 params={"temperature": 0.3, "max_tokens": 77, "top_p": 0.9, "stop": ["END"]},
                 reasoning_level="high", call=CALL)

    [sent] = openai_server.calls()
    body = sent.body
    assert body["model"] == "gpt-fake-upstream"
    assert body["messages"] == [{"role": "system", "content": "You are terse."},
                                {"role": "user", "content": "What is the weather in Paris?"}]
    assert (body["temperature"], body["max_tokens"], body["top_p"], body["stop"]) == (
        0.3, 77, 0.9, ["END"])
    assert body["reasoning_effort"] == "high"
    assert body["tools"] == [{"type": "function", "function": {
        "name": "get_weather", "description": "The weather of a city.",
        "parameters": TOOL.parameters}}]
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"


async def test_anthropic_request_has_system_apart_and_a_default_max_tokens(
        anthropic_server, anthropic_model):
    await invoke(anthropic_model, CONVERSATION, tools=[TOOL],
                 params={"temperature": 0.3, "stop": "END"}, call=CALL)

    body = anthropic_server.calls()[0].body
    assert body["system"] == "You are terse."
    assert body["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "What is the weather in Paris?"}]}]
    assert (body["temperature"], body["max_tokens"], body["stop_sequences"]) == (0.3, 1024, ["END"])
    assert body["tools"] == [{"name": "get_weather", "description": "The weather of a city.",
                              "input_schema": TOOL.parameters}]
    assert "thinking" not in body


async def test_anthropic_reasoning_level_is_a_thinking_budget_on_top_of_max_tokens(
        anthropic_server, anthropic_model):
    await invoke(anthropic_model, CONVERSATION, params={"max_tokens": 500},
                 reasoning_level="low", call=CALL)

    body = anthropic_server.calls()[0].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] == 2548


async def test_tool_calls_and_their_results_go_round_trip(server, model):
    server.script(Reply(text="", tool_calls=[WEATHER]))

    message, _ = await invoke(model, CONVERSATION, tools=[TOOL], call=CALL)

    parsed = Message.model_validate(message)
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in parsed.tool_calls] == [
        ("call_1", "get_weather", {"city": "Paris"})]
    assert parsed.provider_specific_fields == {"finish_reason": "tool_calls"}

    history = [*CONVERSATION, message,
               {"role": "tool", "tool_call_id": "call_1", "content": "18 C, sunny"}]
    await invoke(model, history, tools=[TOOL], call=CALL)

    sent = server.calls()[1].body["messages"]
    if server.kind == "openai":
        assert sent[2]["tool_calls"] == [{"id": "call_1", "type": "function", "function": {
            "name": "get_weather", "arguments": '{"city": "Paris"}'}}]
        assert sent[3] == {"role": "tool", "content": "18 C, sunny", "tool_call_id": "call_1"}
    else:
        assert sent[1] == {"role": "assistant", "content": [
            {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}}]}
        assert sent[2] == {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "content": "18 C, sunny"}]}


async def test_images_reach_the_provider_in_its_own_shape(server, model):
    png = "iVBORw0KGgoAAAANSUhEUg"
    content = [{"type": "text", "text": "What is this?"},
               {"type": "image_base64", "image_base64": png},
               {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}}]

    await invoke(model, [{"role": "user", "content": content}], call=CALL)

    parts = server.calls()[0].body["messages"][0]["content"]
    if server.kind == "openai":
        assert parts == [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}}]
    else:
        assert parts == [
            {"type": "text", "text": "What is this?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}}]


async def test_stream_yields_sdk_chunks_then_usage(server, model):
    server.script(Reply(text="It is sunny", tool_calls=[WEATHER], input_tokens=30,
                        output_tokens=9))

    events = await collect(stream(model, CONVERSATION, tools=[TOOL],
                                  params={"max_tokens": 64}, call=CALL))

    parsed = [LLMStreamEvent.model_validate(event) for event in events]
    chunks = [event.chunk for event in parsed if event.chunk]
    assert "".join(c.content for c in chunks if c.content) == "It is sunny"
    deltas = [call for c in chunks for call in c.tool_calls or []]
    assert {(d.id, d.function.name) for d in deltas} == {("call_1", "get_weather")}
    assert "".join(d.function.arguments for d in deltas) == '{"city": "Paris"}'
    assert [c.is_final for c in chunks].count(True) == 1 and chunks[-1].is_final
    assert chunks[-1].provider_specific_fields == {"finish_reason": "tool_calls"}
    assert events[-1] == {"usage": {"prompt_tokens": 30, "completion_tokens": 9,
                                    "total_tokens": 39, "cached_tokens": 0}}
    assert server.calls()[0].body["stream"] is True
    assert server.calls()[0].body["max_tokens"] == 64
    [row] = await calls()
    assert (row.operation, row.status, row.input_tokens, row.output_tokens) == (
        "stream", "ok", 30, 9)
    assert row.first_token_ms is not None and row.first_token_ms <= row.latency_ms


async def test_closing_a_stream_mid_way_closes_the_upstream_connection(server, model):
    server.script(Reply(text="one two three four", stall_after=3))

    async with aclosing(stream(model, CONVERSATION, call=CALL)) as events:
        first = await anext(events)
        assert first["chunk"]["content"]
        assert server.open_connections == 1

    assert await server.wait_closed(scaled(1))
    [row] = await calls()
    assert (row.status, row.error) == ("cancelled", "cancelled")


async def test_cancelling_the_reading_task_closes_the_upstream_connection(
        openai_server, openai_model):
    openai_server.script(Reply(text="one two three", stall_after=2))
    got_first = asyncio.Event()

    async def read():
        async with aclosing(stream(openai_model, CONVERSATION, call=CALL)) as events:
            async for _ in events:
                got_first.set()

    reader = asyncio.create_task(read())
    await asyncio.wait_for(got_first.wait(), scaled(5))
    reader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reader

    assert await openai_server.wait_closed(scaled(1))
    assert [row.status for row in await calls()] == ["cancelled"]


async def test_cancelling_an_invoke_closes_the_upstream_connection(
        anthropic_server, anthropic_model):
    anthropic_server.script(Reply(stall=True))
    task = asyncio.create_task(invoke(anthropic_model, CONVERSATION, call=CALL))

    async def until_received():
        while not anthropic_server.calls():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(until_received(), scaled(5))

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert await anthropic_server.wait_closed(scaled(1))
    assert [row.status for row in await calls()] == ["cancelled"]


@pytest.mark.parametrize("streamed", [False, True])
async def test_the_runs_deadline_is_the_calls_timeout(openai_server, openai_model, streamed):
    openai_server.script(Reply(stall=True) if not streamed else Reply(stall_after=2))
    call = CallInfo(run_id="run-late", deadline=time.time() + 0.3)
    started = time.monotonic()

    with pytest.raises(ProviderError) as raised:
        if streamed:
            await collect(stream(openai_model, CONVERSATION, call=call))
        else:
            await invoke(openai_model, CONVERSATION, call=call)

    assert time.monotonic() - started < scaled(3)
    assert raised.value.status == "timeout" and raised.value.retryable
    assert await openai_server.wait_closed(scaled(1))
    [row] = await calls()
    assert (row.run_id, row.status) == ("run-late", "timeout")
    assert "timed out" in row.error


async def test_a_deadline_already_passed_calls_nobody(openai_server, openai_model):
    with pytest.raises(ProviderError) as raised:
        await invoke(openai_model, CONVERSATION, call=CallInfo(deadline=time.time() - 1))

    assert raised.value.status == "timeout"
    assert openai_server.requests == []
    assert [row.status for row in await calls()] == ["timeout"]


async def test_a_client_error_is_not_retryable_and_names_the_providers_message(
        openai_server, openai_model):
    openai_server.script(Reply(status=400, error="max_tokens is too large"))

    with pytest.raises(ProviderError) as raised:
        await invoke(openai_model, CONVERSATION, call=CALL)

    assert str(raised.value) == "HTTP 400: max_tokens is too large"
    assert not raised.value.retryable
    [row] = await calls()
    assert (row.status, row.error) == ("error", "HTTP 400: max_tokens is too large")


async def test_count_tokens_asks_anthropic_and_estimates_offline_for_openai(
        anthropic_model, anthropic_server, openai_model, openai_server):
    assert await count_tokens(anthropic_model, CONVERSATION, [TOOL]) == 42
    assert anthropic_server.calls("/count_tokens")[0].body["system"] == "You are terse."

    estimate = await count_tokens(openai_model, CONVERSATION, [TOOL])
    assert 20 < estimate < 100
    assert openai_server.requests == []
    assert await count_tokens(openai_model, [{"role": "user", "content": "你好世界"}]) == 4 + 4


async def test_embeddings_come_back_in_order_and_are_recorded(openai_server, make_model):
    model = await sync_to_async(make_model)(openai_server, "embed-fake", model_type="embedding")

    vectors = await invoke_embedding(model, ["a", "b"], call=CALL)

    assert vectors == [bag_of_words("a"), bag_of_words("b")] and vectors[0] != vectors[1]
    assert openai_server.calls("/embeddings")[0].body["input"] == ["a", "b"]
    [row] = await calls()
    assert (row.operation, row.status, row.input_tokens) == ("embedding", "ok", 6)
