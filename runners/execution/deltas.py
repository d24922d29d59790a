"""Message deltas that stay linear in the reply's length.

LangBot runners send a delta's text either as the new text or as the whole text so far
(`content`), and the SDK's chunks may repeat the whole text in `all_content`: stored and sent
as they come, a long streamed reply costs the square of its length. `coalesced()` turns every
text delta into its new text only, and merges the text deltas that arrive close together into
one: the first text of a message goes out at once (its time to first token is the runner's),
and so does text that comes `COALESCE_SECONDS` or more after the last delta went out (a model
streaming at its own pace is seen at its pace); text that comes sooner waits to join what
follows it, and the longer the reply grows, the bigger the steps it grows by (never more than
`MAX_HOLD_SECONDS` apart). The reply is rebuilt by joining the
deltas' `content`; `message.completed` carries it whole.
"""

import asyncio
from collections.abc import AsyncIterator

COALESCE_SECONDS = 0.1
# A held delta waits past `COALESCE_SECONDS` until it holds 1/SHARE_OF_TEXT of the message's
# text so far, but never past MAX_HOLD_SECONDS: a long reply costs a few dozen frames.
SHARE_OF_TEXT = 8
MAX_HOLD_SECONDS = 1.0
COALESCE_MAX_CHARS = 64 * 1024
# Sequences of the runner's results merged into one delta: the first and the last.
MERGED_FROM = "merged_from_sequence"
# Chunk fields a delta of plain text may carry; any other field set keeps it as it is.
_TEXT_FIELDS = {"role", "content", "all_content", "msg_sequence", "is_final", "resp_message_id"}
# What `next_or_end` returns at the stream's end (a task cannot end with StopAsyncIteration).
END = object()


def new_text(text_so_far: str, content: str, whole: str | None = None) -> str:
    """A delta's new text. The SDK's `all_content` (`whole`), when it extends the text so far,
    says it; else `content` is the whole text so far if it extends it or repeats it (LangBot
    takes every delta for the whole text so far: a delta that repeats it, as n8n's final one
    and its empty items do, adds nothing), or the new text."""
    if isinstance(whole, str) and whole.startswith(text_so_far):
        return whole[len(text_so_far):]
    if text_so_far and content == text_so_far:
        return ""
    if len(content) > len(text_so_far) > 0 and content.startswith(text_so_far):
        return content[len(text_so_far):]
    return content


def _text_chunk(result) -> dict | None:
    """The chunk of a delta whose content is text; None for any other result."""
    if not isinstance(result, dict) or result.get("type") != "message.delta":
        return None
    data = result.get("data")
    chunk = data.get("chunk") if isinstance(data, dict) else None
    if not isinstance(chunk, dict) or not isinstance(chunk.get("content"), str):
        return None
    return chunk


def _held_back(result: dict, chunk: dict) -> bool:
    """Whether a text delta may wait to be merged: plain text only, not a message's final
    delta, nor one that reports usage or carries anything else (a finish reason, tool
    calls), which goes out as it is, its text made new text."""
    return (not chunk.get("is_final") and result.get("usage") is None
            and not any(value is not None for key, value in chunk.items()
                        if key not in _TEXT_FIELDS))


def _mergeable(pending: dict, result: dict, chunk: dict) -> bool:
    held = pending["data"]["chunk"]
    first, last = pending.get(MERGED_FROM, pending.get("sequence")), result.get("sequence")
    consecutive = (pending.get("sequence") is None and last is None) or (
        isinstance(pending.get("sequence"), int) and isinstance(last, int)
        and last == pending["sequence"] + 1 and isinstance(first, int))
    return (consecutive and held.get("role") == chunk.get("role")
            and held.get("resp_message_id") == chunk.get("resp_message_id")
            and len(held["content"]) + len(chunk["content"]) <= COALESCE_MAX_CHARS)


async def next_or_end(stream: AsyncIterator[dict]):
    try:
        return await anext(stream)
    except StopAsyncIteration:
        return END


def _due(held: dict, text_so_far: str, held_since: float, window: float) -> float:
    """When the held delta goes out: after `window` once it holds a fair share of the text
    so far (a viewer of a long reply cannot tell a bigger step), after `MAX_HOLD_SECONDS`
    whatever it holds."""
    share = len(held["data"]["chunk"]["content"]) * SHARE_OF_TEXT >= len(text_so_far)
    return held_since + (window if share else max(window, MAX_HOLD_SECONDS))


async def coalesced(stream: AsyncIterator[dict],
                    window: float = COALESCE_SECONDS) -> AsyncIterator[dict]:
    """The runner's results, text deltas as their new text and merged by bursts.

    A merged delta carries the last merged result's `sequence` and the first one's in
    `MERGED_FROM` (which no result of the runner's keeps). Results other than plain-text
    deltas pass through unchanged otherwise, in order.
    """
    loop = asyncio.get_running_loop()
    text_so_far = ""
    pending: dict | None = None
    held_since = 0.0
    # When the reader last took a text delta and asked for more: the time a slow reader
    # takes is no quiet stretch (under load the deltas keep travelling as one).
    sent_at = float("-inf")
    waiting: asyncio.Future | None = None
    try:
        while True:
            if pending is not None and loop.time() >= _due(pending, text_so_far, held_since,
                                                           window):
                held, pending = pending, None
                yield held
                sent_at = loop.time()
            if pending is None and waiting is None:
                result = await next_or_end(stream)
            else:
                waiting = waiting or asyncio.ensure_future(next_or_end(stream))
                timeout = None if pending is None else max(
                    _due(pending, text_so_far, held_since, window) - loop.time(), 0)
                done, _ = await asyncio.wait({waiting}, timeout=timeout)
                if not done:  # due: sent at the top of the loop
                    continue
                result, waiting = waiting.result(), None
            if result is END:
                break
            if isinstance(result, dict) and MERGED_FROM in result:
                # Only a merge made here says what it merged: a runner's claim would have its
                # run mark every sequence up to its own as seen.
                result = {key: value for key, value in result.items() if key != MERGED_FROM}
            if isinstance(result, dict) and result.get("type") == "message.completed":
                text_so_far = ""  # the next message's deltas start over
            chunk = _text_chunk(result)
            first = False
            if chunk is not None:
                text = new_text(text_so_far, chunk["content"], chunk.get("all_content"))
                # The first text of a message is never held, nor text after a quiet stretch,
                # nor what may not wait.
                first = (not text_so_far or not _held_back(result, chunk)
                         or (pending is None and loop.time() - sent_at >= window))
                text_so_far += text
                chunk = {key: value for key, value in chunk.items()
                         if value is not None and key != "all_content"}
                chunk["content"] = text
                if pending is not None and not first and _mergeable(pending, result, chunk):
                    pending[MERGED_FROM] = pending.get(MERGED_FROM, pending.get("sequence"))
                    pending["sequence"] = result.get("sequence")
                    pending["data"]["chunk"]["content"] += text
                    continue
            if pending is not None:
                held, pending = pending, None
                yield held
                sent_at = loop.time()
            if chunk is not None:
                merged = {**result, "data": {**result["data"], "chunk": chunk}}
                if first:
                    yield merged
                    sent_at = loop.time()
                    continue
                pending, held_since = merged, loop.time()
                continue
            yield result
        if pending is not None:
            yield pending
    finally:
        if waiting is not None:
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)
        # Closing the runner's stream is what cancels it on the runtime's side.
        await stream.aclose()
