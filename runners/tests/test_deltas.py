"""Streamed replies stay linear: each delta carries its new text only, and bursts travel as one."""

import asyncio

from runners.execution.deltas import MERGED_FROM, coalesced


def delta(sequence, content, **chunk):
    return {"type": "message.delta", "sequence": sequence,
            "data": {"chunk": {"role": "assistant", "content": content, **chunk}}}


async def collect(results, window=0.05):
    async def stream():
        for result in results:
            yield result
    return [item async for item in coalesced(stream(), window)]


def test_a_burst_of_deltas_becomes_one_delta_with_the_whole_text():
    out = asyncio.run(collect([delta(1, "ab "), delta(2, "ab "), delta(3, "cd"),
                               {"type": "run.completed", "sequence": 4, "data": {}}]))
    assert [item["type"] for item in out] == ["message.delta", "run.completed"]
    assert out[0]["data"]["chunk"]["content"] == "ab ab cd"
    assert (out[0][MERGED_FROM], out[0]["sequence"]) == (1, 3)


def test_deltas_that_repeat_the_whole_text_so_far_keep_only_their_new_text():
    out = asyncio.run(collect([delta(1, "Hel"), delta(2, "Hello"), delta(3, "Hello, world")]))
    assert "".join(item["data"]["chunk"]["content"] for item in out) == "Hello, world"


def test_all_content_says_what_is_new_and_is_not_kept():
    out = asyncio.run(collect([delta(1, "ab ", all_content="ab"),
                               delta(2, "ab ", all_content="ab ab")]))
    chunk = out[0]["data"]["chunk"]
    assert chunk["content"] == "ab ab" and "all_content" not in chunk


def test_a_held_delta_goes_out_when_the_runner_pauses():
    async def scenario():
        later = asyncio.Event()

        async def stream():
            yield delta(1, "first ")
            await later.wait()
            yield delta(2, "second")

        results = coalesced(stream(), window=0.01)
        first = await asyncio.wait_for(anext(results), 5)
        later.set()
        rest = [item async for item in results]
        return first, rest

    first, rest = asyncio.run(scenario())
    assert first["data"]["chunk"]["content"] == "first "
    assert [item["data"]["chunk"]["content"] for item in rest] == ["second"]


def test_other_results_pass_through_in_order_and_end_a_burst():
    tool = {"type": "tool.call.started", "sequence": 2, "data": {"tool_name": "t"}}
    out = asyncio.run(collect([delta(1, "a"), tool, delta(3, "b"), delta(4, "c")]))
    assert [(item["type"], item["sequence"]) for item in out] == [
        ("message.delta", 1), ("tool.call.started", 2), ("message.delta", 4)]


def test_deltas_with_tool_calls_are_left_as_they_are():
    call = delta(2, "", tool_calls=[{"id": "c1", "type": "function",
                                     "function": {"name": "f", "arguments": "{}"}}])
    out = asyncio.run(collect([delta(1, "a"), call]))
    assert len(out) == 2 and out[1] is call
