"""Streamed replies stay linear: each delta carries its new text only, and bursts travel as one."""

import asyncio

from runners.execution import deltas
from runners.execution.deltas import MERGED_FROM, coalesced
from tests.timing import scaled


def delta(sequence, content, **chunk):
    return {"type": "message.delta", "sequence": sequence,
            "data": {"chunk": {"role": "assistant", "content": content, **chunk}}}


async def collect(results, window=0.05):
    async def stream():
        for result in results:
            yield result
    return [item async for item in coalesced(stream(), window)]


def test_the_first_text_goes_out_alone_and_the_burst_after_it_as_one_delta():
    out = asyncio.run(collect([delta(1, "ab "), delta(2, "xy "), delta(3, "cd"),
                               delta(4, "!"), {"type": "run.completed", "sequence": 5,
                                               "data": {}}]))
    assert [item["type"] for item in out] == ["message.delta"] * 2 + ["run.completed"]
    assert [item["data"]["chunk"]["content"] for item in out[:2]] == ["ab ", "xy cd!"]
    assert (out[1][MERGED_FROM], out[1]["sequence"]) == (2, 4)


def test_a_runner_cannot_claim_a_merge_of_the_results_before_its_own():
    forged = [{**delta(1, "hi"), MERGED_FROM: 1, "sequence": 10**12},
              {"type": "run.completed", "sequence": 2, MERGED_FROM: 1, "data": {}}]
    out = asyncio.run(collect(forged))
    assert [item["type"] for item in out] == ["message.delta", "run.completed"]
    assert all(MERGED_FROM not in item for item in out)


def test_the_first_text_is_not_held_while_the_runner_is_still_talking():
    async def scenario():
        later = asyncio.Event()

        async def stream():
            yield delta(1, "Hello")
            await later.wait()
            yield delta(2, ", world")

        results = coalesced(stream(), window=60)
        first = await asyncio.wait_for(anext(results), 5)
        later.set()
        return first, [item async for item in results]

    first, rest = asyncio.run(scenario())
    assert first["data"]["chunk"]["content"] == "Hello"
    assert [item["data"]["chunk"]["content"] for item in rest] == [", world"]


def test_deltas_that_repeat_the_whole_text_so_far_keep_only_their_new_text():
    out = asyncio.run(collect([delta(1, "Hel"), delta(2, "Hello"), delta(3, "Hello, world")]))
    assert "".join(item["data"]["chunk"]["content"] for item in out) == "Hello, world"


def test_all_content_says_what_is_new_and_is_not_kept():
    out = asyncio.run(collect([delta(1, "ab ", all_content="ab"),
                               delta(2, "ab ", all_content="ab ab")]))
    assert [item["data"]["chunk"]["content"] for item in out] == ["ab", " ab"]
    assert all("all_content" not in item["data"]["chunk"] for item in out)


def test_a_held_delta_goes_out_when_the_runner_pauses():
    async def scenario():
        later = asyncio.Event()

        async def stream():
            yield delta(1, "first ")
            yield delta(2, "then ")
            await later.wait()
            yield delta(3, "second")

        results = coalesced(stream(), window=0.01)
        first = await asyncio.wait_for(anext(results), 5)
        second = await asyncio.wait_for(anext(results), 5)
        later.set()
        return first, second, [item async for item in results]

    first, second, rest = asyncio.run(scenario())
    assert [first["data"]["chunk"]["content"], second["data"]["chunk"]["content"]] == [
        "first ", "then "]
    assert [item["data"]["chunk"]["content"] for item in rest] == ["second"]


def test_text_after_a_quiet_stretch_goes_out_at_once_however_little(monkeypatch):
    # A model streaming at its own pace is seen at its pace, not in steps.
    monkeypatch.setattr(deltas, "MAX_HOLD_SECONDS", 3600)

    async def scenario():
        later = asyncio.Event()

        async def stream():
            yield delta(1, "a long first sentence " * 10)
            await asyncio.sleep(0.05)  # five windows of quiet
            yield delta(2, "x")
            await later.wait()
            yield delta(3, "y")

        results = coalesced(stream(), window=0.01)
        await anext(results)
        second = await asyncio.wait_for(anext(results), scaled(10))
        later.set()
        return second, [item async for item in results]

    second, rest = asyncio.run(scenario())
    assert second["data"]["chunk"]["content"] == "x"
    assert [item["data"]["chunk"]["content"] for item in rest] == ["y"]


def test_a_slow_reader_still_gets_a_burst_in_a_few_deltas():
    # The time the reader takes over each delta is not a quiet stretch of the runner's.
    async def stream():
        for n in range(30):
            yield delta(n + 1, f"w{n} ")
            await asyncio.sleep(0.01)

    async def slow_reader():
        out = []
        async for item in coalesced(stream(), window=0.2):
            out.append(item)
            await asyncio.sleep(0.3)
        return out

    out = asyncio.run(slow_reader())
    assert text(out) == "".join(f"w{n} " for n in range(30))
    assert len(out) <= 6


def test_other_results_pass_through_in_order_and_end_a_burst():
    tool = {"type": "tool.call.started", "sequence": 3, "data": {"tool_name": "t"}}
    out = asyncio.run(collect([delta(1, "a"), delta(2, "b"), tool, delta(4, "c"),
                               delta(5, "d")]))
    assert [(item["type"], item["sequence"]) for item in out] == [
        ("message.delta", 1), ("message.delta", 2), ("tool.call.started", 3),
        ("message.delta", 5)]


def test_deltas_with_tool_calls_keep_them_and_go_out_at_once():
    call = delta(2, "", tool_calls=[{"id": "c1", "type": "function",
                                     "function": {"name": "f", "arguments": "{}"}}])
    out = asyncio.run(collect([delta(1, "a"), call]))
    assert len(out) == 2 and out[1] == call


def test_closing_the_stream_closes_the_runners_stream_which_cancels_the_runner():
    closed = []

    async def stream():
        try:
            yield delta(1, "a")
            yield delta(2, "b")
            await asyncio.sleep(60)
        finally:
            closed.append(True)

    async def scenario():
        results = coalesced(stream(), window=60)
        await anext(results)
        try:  # "b" is held and the runner's next result awaited: the run's deadline hits
            await asyncio.wait_for(anext(results), 0.05)
        except TimeoutError:
            pass
        await results.aclose()

    asyncio.run(scenario())
    assert closed == [True]


def text(out) -> str:
    return "".join(item["data"]["chunk"]["content"] for item in out
                   if item["type"] == "message.delta")


def test_a_delta_repeating_the_whole_text_adds_nothing_as_langbot_reads_it():
    # n8n: an empty item repeats the running text, and each node's end repeats it, final.
    out = asyncio.run(collect([delta(1, "Hello"), delta(2, "Hello"), delta(3, "Hello", is_final=True),
                               delta(4, "Hello, world"), delta(5, "Hello, world!"),
                               delta(6, "Hello, world!", is_final=True)]))
    assert text(out) == "Hello, world!"


def test_a_delta_carrying_more_than_text_goes_out_at_once_with_its_new_text_only():
    # LocalAgent's last chunk: the whole text again, with the provider's finish reason.
    out = asyncio.run(collect([delta(1, "Hello"), delta(2, "Hello from"),
                               delta(3, "Hello from fake", provider_specific_fields={
                                   "finish_reason": "stop"})]))
    assert text(out) == "Hello from fake"
    assert out[-1]["data"]["chunk"]["provider_specific_fields"] == {"finish_reason": "stop"}
