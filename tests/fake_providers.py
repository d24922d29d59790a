"""Fake model providers that are real HTTP servers on 127.0.0.1, for the official SDKs to call.

`FakeProvider("openai")` speaks OpenAI's chat completions and embeddings and the Jina/Cohere
`/rerank` that OpenAI-compatible servers add, `FakeProvider("anthropic")`
Anthropic's messages and token counting; both stream with SSE `data:` lines. Each answers
from a script of `Reply`s (then the default reply), records every request (`requests`: path,
headers, JSON body) and counts connections (`opened`, `closed`), so a test can assert what
reached the provider and that a cancelled call hung up.

The server is plain asyncio on its own thread and loop: it serves sync tests (views called
through `async_to_sync`) and async tests alike, and it sees the client hang up at once,
which a stalled reply waits for.
"""

import asyncio
import hashlib
import itertools
import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

EMBEDDING_DIMENSIONS = 64


def bag_of_words(text: str) -> list[float]:
    """The fake's embedding of `text`: its words hashed into EMBEDDING_DIMENSIONS counts,
    normalized. Texts sharing words are near, so the nearest chunk to a question is known."""
    vector = [0.0] * EMBEDDING_DIMENSIONS
    for word in "".join(c if c.isalnum() else " " for c in text.lower()).split():
        vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % EMBEDDING_DIMENSIONS] += 1
    norm = math.sqrt(sum(value * value for value in vector)) or 1.0
    return [value / norm for value in vector]


def _words(text: str) -> set[str]:
    return set("".join(c if c.isalnum() else " " for c in text.lower()).split())


def overlap(query: str, document: str) -> float:
    """The fake's rerank score: the share of the query's words the document holds."""
    asked = _words(query)
    return len(asked & _words(document)) / len(asked) if asked else 0.0


@dataclass
class Reply:
    """What the fake answers to one call.

    `tool_calls`: `[{"id", "name", "arguments" (JSON text)}]`, or `answer(request body)`
    gives the reply from what the call sent (a tool call naming a file the message named,
    say). `status` >= 400 answers an error with `error` as its message. `stall` answers nothing until the client hangs up;
    `stall_after` streams that many chunks first. `fail_after` streams that many chunks and
    then an error event. `stamped` streams that many text pieces instead of `text`, each the
    time it was sent (`@<epoch seconds> `), and `pace` waits that long between chunks (a model
    streaming at its own speed, for `bench/concurrency.py`).
    """

    text: str = "Hello there!"
    tool_calls: list[dict] = field(default_factory=list)
    status: int = 200
    error: str = "upstream exploded"
    input_tokens: int = 12
    output_tokens: int = 5
    cached_tokens: int = 0
    stall: bool = False
    stall_after: int | None = None
    fail_after: int | None = None
    answer: "Callable[[dict], Reply] | None" = None
    stamped: int = 0
    pace: float = 0.0


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: dict


class FakeProvider:
    def __init__(self, kind: str):
        assert kind in ("openai", "anthropic")
        self.kind = kind
        self.requests: list[Recorded] = []
        self.opened = 0
        self.closed = 0
        self._script: deque[Reply] = deque()
        self.default = Reply()
        # Seconds each embeddings call takes: long enough, a document's progress can be seen.
        self.embedding_delay = 0.0
        # The upstream models `GET /models` lists (name, context window or None).
        self.models: list[tuple[str, int | None]] = [("fake-small", 32_000),
                                                    ("fake-large", None)]
        self._ids = itertools.count(1)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name=f"fake-{kind}-provider")
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task] = set()
        self.port = 0

    # -- control, from the test's thread -------------------------------------------------------

    def start(self) -> "FakeProvider":
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop).result()
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        async def shut():
            self._server.close()
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shut(), self._loop).result(timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    @property
    def base_url(self) -> str:
        # The OpenAI SDK takes the /v1 prefix in its base URL, the Anthropic SDK adds it itself.
        root = f"http://127.0.0.1:{self.port}"
        return f"{root}/v1" if self.kind == "openai" else root

    @property
    def open_connections(self) -> int:
        return self.opened - self.closed

    def script(self, *replies: Reply) -> None:
        """Answer the next calls with these replies, in order; then the default reply."""
        self._script.extend(replies)

    def calls(self, suffix: str = "") -> list[Recorded]:
        """The model calls received (paths ending with `suffix`)."""
        return [r for r in self.requests if r.path.endswith(suffix or self._chat_path)]

    @property
    def _chat_path(self) -> str:
        return "/chat/completions" if self.kind == "openai" else "/messages"

    def _models_page(self) -> dict:
        """The model list as each API pages it (one page)."""
        if self.kind == "openai":
            return {"object": "list", "data": [
                {"id": name, "object": "model", "created": 1_700_000_000, "owned_by": "fake"}
                for name, _ in self.models]}
        data = [{"id": name, "type": "model", "display_name": name.replace("-", " ").title(),
                 "created_at": "2025-01-01T00:00:00Z", **(
                     {"max_input_tokens": window} if window else {})}
                for name, window in self.models]
        return {"data": data, "has_more": False, "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None}

    async def wait_closed(self, timeout: float) -> bool:
        """Whether every connection is closed within `timeout` seconds (polled)."""
        end = time.monotonic() + timeout
        while self.open_connections and time.monotonic() < end:
            await asyncio.sleep(0.01)
        return self.open_connections == 0

    # -- the server, on its own loop -----------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.opened += 1
        self._connections.add(asyncio.current_task())
        try:
            while await self._one_request(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            self._connections.discard(asyncio.current_task())
            writer.close()
            self.closed += 1

    async def _one_request(self, reader, writer) -> bool:
        """Serve one request; whether the connection stays open for another."""
        line = await reader.readline()
        if not line:
            return False
        method, path, _ = line.decode().split(" ", 2)
        headers = {}
        while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = line.decode().partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length") or 0)
        raw = await reader.readexactly(length) if length else b""
        body = json.loads(raw) if raw else {}
        self.requests.append(Recorded(method, path.split("?")[0], headers, body))

        if method == "GET" and path.split("?")[0].endswith("/models"):
            return await self._json(writer, 200, self._models_page())
        if path.endswith("/count_tokens"):
            return await self._json(writer, 200, {"input_tokens": 42})
        if path.endswith("/embeddings"):
            await asyncio.sleep(self.embedding_delay)
            inputs = body.get("input")
            inputs = [inputs] if isinstance(inputs, str) else inputs
            data = [{"object": "embedding", "index": i, "embedding": bag_of_words(text)}
                    for i, text in enumerate(inputs)]
            return await self._json(writer, 200, {
                "object": "list", "data": data, "model": body.get("model"),
                "usage": {"prompt_tokens": 3 * len(inputs), "total_tokens": 3 * len(inputs)}})
        if path.endswith("/rerank"):
            documents = body.get("documents") or []
            ranked = sorted(({"index": i, "relevance_score": overlap(body["query"], text)}
                             for i, text in enumerate(documents)),
                            key=lambda item: -item["relevance_score"])
            return await self._json(writer, 200, {
                "model": body.get("model"), "results": ranked[:body.get("top_n") or None],
                "usage": {"total_tokens": 2 * len(documents)}})
        if not path.endswith(self._chat_path):
            return await self._json(writer, 404, self._error_body("no such path"))

        reply = self._script.popleft() if self._script else self.default
        if reply.answer is not None:
            reply = reply.answer(body)
        if reply.stall:
            await self._until_hang_up(reader)
            return False
        if reply.status >= 400:
            return await self._json(writer, reply.status, self._error_body(reply.error))
        if body.get("stream"):
            return await self._stream(reader, writer, body, reply)
        return await self._json(writer, 200, self._complete(body, reply))

    @staticmethod
    async def _until_hang_up(reader):
        while await reader.read(1024):
            pass

    async def _json(self, writer, status: int, payload: dict) -> bool:
        data = json.dumps(payload).encode()
        writer.write(f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n"
                     f"content-length: {len(data)}\r\n\r\n".encode() + data)
        await writer.drain()
        return True

    async def _stream(self, reader, writer, body: dict, reply: Reply) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                     b"transfer-encoding: chunked\r\n\r\n")
        events = (self._openai_events if self.kind == "openai" else self._anthropic_events)(
            body, reply)
        for sent, event in enumerate(events):
            if sent == reply.stall_after:
                await writer.drain()
                await self._until_hang_up(reader)
                return False
            if sent == reply.fail_after:
                event = self._error_event(reply.error)
            payload = event.encode()
            writer.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
            await writer.drain()
            if sent == reply.fail_after:
                break
            if reply.pace:
                await asyncio.sleep(reply.pace)
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

    # -- what each kind says -------------------------------------------------------------------

    @staticmethod
    def _pieces(text: str) -> list[str]:
        words = text.split(" ")
        return [word + (" " if i < len(words) - 1 else "") for i, word in enumerate(words)]

    def _error_body(self, message: str) -> dict:
        if self.kind == "openai":
            return {"error": {"message": message, "type": "server_error", "code": None}}
        return {"type": "error", "error": {"type": "api_error", "message": message}}

    def _error_event(self, message: str) -> str:
        if self.kind == "openai":
            return f"data: {json.dumps(self._error_body(message))}\n\n"
        return f"event: error\ndata: {json.dumps(self._error_body(message))}\n\n"

    def _complete(self, body: dict, reply: Reply) -> dict:
        n = next(self._ids)
        if self.kind == "openai":
            message = {"role": "assistant", "content": reply.text or None}
            if reply.tool_calls:
                message["tool_calls"] = [
                    {"id": c["id"], "type": "function",
                     "function": {"name": c["name"], "arguments": c["arguments"]}}
                    for c in reply.tool_calls]
            return {
                "id": f"chatcmpl-{n}", "object": "chat.completion", "created": 1,
                "model": body.get("model"),
                "choices": [{"index": 0, "message": message,
                             "finish_reason": "tool_calls" if reply.tool_calls else "stop"}],
                "usage": self._openai_usage(reply),
            }
        content = [{"type": "text", "text": reply.text}] if reply.text else []
        content += [{"type": "tool_use", "id": c["id"], "name": c["name"],
                     "input": json.loads(c["arguments"])} for c in reply.tool_calls]
        return {
            "id": f"msg_{n}", "type": "message", "role": "assistant", "model": body.get("model"),
            "content": content, "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
            "stop_sequence": None, "usage": self._anthropic_usage(reply),
        }

    @staticmethod
    def _openai_usage(reply: Reply) -> dict:
        return {"prompt_tokens": reply.input_tokens, "completion_tokens": reply.output_tokens,
                "total_tokens": reply.input_tokens + reply.output_tokens,
                "prompt_tokens_details": {"cached_tokens": reply.cached_tokens}}

    @staticmethod
    def _anthropic_usage(reply: Reply) -> dict:
        # Anthropic counts cache reads apart from input_tokens.
        return {"input_tokens": reply.input_tokens - reply.cached_tokens,
                "output_tokens": reply.output_tokens,
                "cache_read_input_tokens": reply.cached_tokens,
                "cache_creation_input_tokens": 0}

    def _openai_events(self, body: dict, reply: Reply):
        n = next(self._ids)

        def event(delta: dict | None, finish=None, usage=None) -> str:
            chunk = {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "created": 1,
                     "model": body.get("model"),
                     "choices": [] if delta is None else
                     [{"index": 0, "delta": delta, "finish_reason": finish}]}
            if usage:
                chunk["usage"] = usage
            return f"data: {json.dumps(chunk)}\n\n"

        yield event({"role": "assistant", "content": ""})
        for _ in range(reply.stamped):  # each made as it is sent: the generator is lazy
            yield event({"content": f"@{time.time():.6f} "})
        for piece in self._pieces(reply.text) if reply.text and not reply.stamped else []:
            yield event({"content": piece})
        for index, call in enumerate(reply.tool_calls):
            half = len(call["arguments"]) // 2
            yield event({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                         "function": {"name": call["name"], "arguments": ""}}]})
            for part in (call["arguments"][:half], call["arguments"][half:]):
                yield event({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
        yield event({}, finish="tool_calls" if reply.tool_calls else "stop")
        if (body.get("stream_options") or {}).get("include_usage"):
            yield event(None, usage=self._openai_usage(reply))
        yield "data: [DONE]\n\n"

    def _anthropic_events(self, body: dict, reply: Reply):
        n = next(self._ids)

        def event(kind: str, **data) -> str:
            return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

        usage = self._anthropic_usage(reply)
        yield event("message_start", message={
            "id": f"msg_{n}", "type": "message", "role": "assistant", "model": body.get("model"),
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {**usage, "output_tokens": 1}})
        index = 0
        if reply.text:
            yield event("content_block_start", index=0, content_block={"type": "text", "text": ""})
            for piece in self._pieces(reply.text):
                yield event("content_block_delta", index=0,
                            delta={"type": "text_delta", "text": piece})
            yield event("content_block_stop", index=0)
            index = 1
        for offset, call in enumerate(reply.tool_calls):
            at = index + offset
            half = len(call["arguments"]) // 2
            yield event("content_block_start", index=at, content_block={
                "type": "tool_use", "id": call["id"], "name": call["name"], "input": {}})
            for part in (call["arguments"][:half], call["arguments"][half:]):
                yield event("content_block_delta", index=at,
                            delta={"type": "input_json_delta", "partial_json": part})
            yield event("content_block_stop", index=at)
        yield event("message_delta",
                    delta={"stop_reason": "tool_use" if reply.tool_calls else "end_turn",
                           "stop_sequence": None},
                    usage={"output_tokens": reply.output_tokens})
        yield event("message_stop")


@pytest.fixture
def openai_server():
    server = FakeProvider("openai").start()
    yield server
    server.stop()


@pytest.fixture
def anthropic_server():
    server = FakeProvider("anthropic").start()
    yield server
    server.stop()
