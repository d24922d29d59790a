"""Fallback across models: transient failures move on to the next model, each attempt is its
own ModelCall, and a stream is committed to its model from its first chunk."""

import time
from contextlib import aclosing
from decimal import Decimal

import pytest
from asgiref.sync import sync_to_async

from ledger.models import ModelCall
from ledger.selectors.model_calls import usage_for_agent, usage_for_run
from runners.providers.calls import CallInfo
from runners.providers.errors import ModelsUnavailable, ProviderError
from runners.providers.fallback import stream_with_fallback, with_fallback
from runners.providers.lookup import load_models
from tests.fake_providers import FakeProvider, Reply

pytestmark = pytest.mark.django_db(transaction=True)

CALL = CallInfo(run_id="run-9", agent_id="agent-9", caller="builtin:llm")
HELLO = [{"role": "user", "content": "Hello?"}]


async def rows() -> list[ModelCall]:
    return [row async for row in ModelCall.objects.order_by("id")]


async def collect(events) -> list[dict]:
    async with aclosing(events):
        return [event async for event in events]


@pytest.fixture
def dead_model(make_model):
    """A model whose provider refuses connections (its port is closed)."""
    server = FakeProvider("openai").start()
    server.stop()
    return make_model(server, "dead-model")


async def test_a_500_falls_back_and_both_attempts_are_recorded_with_tokens_and_cost(
        openai_server, openai_model, anthropic_server, anthropic_model):
    openai_server.script(Reply(status=500, error="upstream exploded"))
    anthropic_server.script(Reply(text="Hi!", input_tokens=100, output_tokens=50))

    message, usage = await with_fallback([openai_model, anthropic_model], HELLO, call=CALL)

    assert message["content"] == "Hi!"
    assert usage["prompt_tokens"] == 100 and usage["completion_tokens"] == 50
    first, second = await rows()
    assert (first.model_name, first.attempt, first.status, first.error) == (
        "gpt-fake", 1, "error", "HTTP 500: upstream exploded")
    assert (first.input_tokens, first.output_tokens, first.cost) == (0, 0, Decimal(0))
    assert (second.model_name, second.attempt, second.status) == ("claude-fake", 2, "ok")
    assert (second.input_tokens, second.output_tokens) == (100, 50)
    assert second.cost == Decimal("0.0006")  # (100 x 2 + 50 x 8) / 1e6
    totals = await sync_to_async(usage_for_run)("run-9")
    assert totals == {"calls": 2, "input_tokens": 100, "output_tokens": 50, "cached_tokens": 0,
                      "cost": Decimal("0.0006")}
    assert await sync_to_async(usage_for_agent)("agent-9") == totals


async def test_a_429_and_a_refused_connection_fall_back_too(
        openai_server, openai_model, dead_model, anthropic_model):
    openai_server.script(Reply(status=429, error="slow down"))

    message, _ = await with_fallback([openai_model, dead_model, anthropic_model], HELLO, call=CALL)

    assert message["content"] == "Hello there!"
    assert [(r.attempt, r.status) for r in await rows()] == [(1, "error"), (2, "error"), (3, "ok")]
    errors = [r.error for r in await rows()]
    assert errors[0] == "HTTP 429: slow down"
    assert errors[1].startswith("connection error")


async def test_a_client_error_does_not_fall_back(
        openai_server, openai_model, anthropic_server, anthropic_model):
    openai_server.script(Reply(status=401, error="bad key"))

    with pytest.raises(ProviderError, match="HTTP 401: bad key") as raised:
        await with_fallback([openai_model, anthropic_model], HELLO, call=CALL)

    assert not isinstance(raised.value, ModelsUnavailable)
    assert anthropic_server.requests == []
    assert [r.status for r in await rows()] == ["error"]


async def test_every_model_failing_names_each_models_error(
        openai_server, openai_model, anthropic_server, anthropic_model):
    openai_server.script(Reply(status=500, error="boom"))
    anthropic_server.script(Reply(status=503, error="overloaded"))

    with pytest.raises(ModelsUnavailable) as raised:
        await with_fallback([openai_model, anthropic_model], HELLO, call=CALL)

    assert str(raised.value) == ("model.unavailable: gpt-fake: HTTP 500: boom; "
                                 "claude-fake: HTTP 503: overloaded")
    assert len(await rows()) == 2


async def test_a_stream_failing_before_its_first_chunk_falls_back(
        openai_server, openai_model, anthropic_server, anthropic_model):
    openai_server.script(Reply(status=500))
    anthropic_server.script(Reply(text="from the fallback", output_tokens=3))

    events = await collect(stream_with_fallback([openai_model, anthropic_model], HELLO, call=CALL))

    text = "".join(e["chunk"]["content"] or "" for e in events if "chunk" in e)
    assert text == "from the fallback"
    assert events[-1]["usage"]["completion_tokens"] == 3
    assert [(r.operation, r.attempt, r.status) for r in await rows()] == [
        ("stream", 1, "error"), ("stream", 2, "ok")]


async def test_no_fallback_after_the_first_streamed_chunk(
        openai_server, openai_model, anthropic_server, anthropic_model):
    openai_server.script(Reply(text="partial answer that breaks", fail_after=3))
    received = []

    with pytest.raises(ProviderError) as raised:
        async with aclosing(stream_with_fallback([openai_model, anthropic_model], HELLO,
                                                 call=CALL)) as events:
            async for event in events:
                received.append(event)

    assert not isinstance(raised.value, ModelsUnavailable)
    assert received and received[0]["chunk"]["content"] == "partial "
    assert anthropic_server.requests == []
    assert [(r.model_name, r.status) for r in await rows()] == [("gpt-fake", "error")]


async def test_the_runs_deadline_stops_the_chain(openai_server, openai_model, anthropic_server,
                                                 anthropic_model):
    openai_server.script(Reply(stall=True))
    call = CallInfo(run_id="run-late", deadline=time.time() + 0.2)

    with pytest.raises(ModelsUnavailable, match="gpt-fake: timed out"):
        await with_fallback([openai_model, anthropic_model], HELLO, call=call)

    assert anthropic_server.requests == []
    assert [r.status for r in await rows()] == ["timeout"]


async def test_models_load_by_name_in_order_skipping_unknown_and_inactive(
        make_model, openai_server, anthropic_server):
    await sync_to_async(make_model)(openai_server, "first")
    await sync_to_async(make_model)(anthropic_server, "second")
    await sync_to_async(make_model)(openai_server, "retired", is_active=False)

    models = await load_models(["second", "nope", "retired", "first", "second"])

    assert [m.name for m in models] == ["second", "first"]
    assert models[0].provider.kind == "anthropic"  # loaded: no query from async code later
