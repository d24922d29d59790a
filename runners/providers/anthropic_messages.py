"""Kind `anthropic`: Anthropic's Messages API through `AsyncAnthropic`.

System messages become the `system` field, tool results user turns, and consecutive turns of
one role merge (the API wants user and assistant to alternate). Thinking blocks come back in
`provider_specific_fields["anthropic_thinking"]` and are sent again with that assistant turn,
as tool use with thinking requires.
"""

import json
from collections.abc import AsyncIterator

import anthropic

from runners.providers.messages import (
    Message,
    Tool,
    assistant_message,
    chunk,
    image_url,
    text_of,
    tool_call,
)
from runners.providers.usage import Usage

# max_tokens is required by the API; this is the answer's room when the caller sets none.
DEFAULT_MAX_TOKENS = 1024
RESERVED = frozenset({"model", "messages", "tools", "stream", "system", "max_tokens", "stop"})
# Thinking budgets per SDK reasoning level (the API's minimum is 1024).
BUDGET = {"minimal": 1024, "low": 2048, "enabled": 8192, "medium": 8192, "high": 16384,
          "xhigh": 24576, "max": 32000}
FINISH = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls",
          "max_tokens": "length"}
THINKING = "anthropic_thinking"


def client(*, base_url: str, api_key: str, timeout: float,
           headers: dict) -> anthropic.AsyncAnthropic:
    # The SDK adds /v1 itself; a base URL copied with it would double it.
    base_url = base_url.rstrip("/").removesuffix("/v1") if base_url else None
    return anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url, timeout=timeout,
                                    max_retries=0, default_headers=headers or None)


def _blocks(message: Message) -> list[dict]:
    content = message.content
    if not isinstance(content, list):
        return [{"type": "text", "text": content}] if content else []
    blocks = []
    for element in content:
        url = image_url(element)
        if url and url.startswith("data:"):
            media_type, _, data = url.removeprefix("data:").partition(";base64,")
            blocks.append({"type": "image",
                           "source": {"type": "base64", "media_type": media_type, "data": data}})
        elif url:
            blocks.append({"type": "image", "source": {"type": "url", "url": url}})
        elif text := text_of([element]):
            blocks.append({"type": "text", "text": text})
    return blocks


def _arguments(text: str) -> dict:
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError:
        return {"arguments": text}  # the model's own malformed call, sent back as it was
    return value if isinstance(value, dict) else {"value": value}


def _turns(messages: list[Message]) -> tuple[str, list[dict]]:
    system, turns = [], []
    for message in messages:
        if message.role == "system":
            system.append(text_of(message.content))
            continue
        if message.role == "tool":
            role, blocks = "user", [{"type": "tool_result", "tool_use_id": message.tool_call_id,
                                     "content": text_of(message.content)}]
        elif message.role == "assistant":
            role = "assistant"
            blocks = list((message.provider_specific_fields or {}).get(THINKING) or [])
            blocks += _blocks(message)
            blocks += [{"type": "tool_use", "id": call.id, "name": call.function.name,
                        "input": _arguments(call.function.arguments)}
                       for call in message.tool_calls or []]
        else:
            role, blocks = "user", _blocks(message)
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return "\n\n".join(part for part in system if part), turns


def request(upstream_model: str, messages: list[Message], tools: list[Tool], params: dict,
            reasoning_level: str | None) -> dict:
    """`messages.create` arguments; other model params (temperature, top_p, top_k, ...) pass
    through as body fields, `stop` as `stop_sequences`."""
    system, turns = _turns(messages)
    extra = {key: value for key, value in params.items() if key not in RESERVED}
    if params.get("stop"):
        stop = params["stop"]
        extra["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    args = {"model": upstream_model, "messages": turns,
            "max_tokens": int(params.get("max_tokens") or DEFAULT_MAX_TOKENS), "extra_body": extra}
    if system:
        args["system"] = system
    if tools:
        args["tools"] = [{"name": tool.name, "description": tool.description,
                          "input_schema": tool.parameters or {"type": "object"}}
                         for tool in tools]
    if reasoning_level == "disabled":
        args["thinking"] = {"type": "disabled"}
    elif reasoning_level in BUDGET:
        # max_tokens must exceed the budget: the budget comes on top of the answer's room.
        args["thinking"] = {"type": "enabled", "budget_tokens": BUDGET[reasoning_level]}
        args["max_tokens"] += BUDGET[reasoning_level]
    return args


def count_args(args: dict) -> dict:
    """The `messages.count_tokens` arguments of a `request()`."""
    return {key: args[key] for key in ("model", "messages", "system", "tools", "thinking")
            if key in args}


def _usage(usage) -> Usage:
    # The API counts cache reads and writes apart from input_tokens; ours includes them.
    cached = usage.cache_read_input_tokens or 0
    return Usage(
        input_tokens=(usage.input_tokens or 0) + cached + (usage.cache_creation_input_tokens or 0),
        output_tokens=usage.output_tokens or 0,
        cached_tokens=cached)


def _thinking(block) -> dict:
    return block.model_dump(include={"type", "thinking", "signature", "data"}, exclude_none=True)


async def complete(api: anthropic.AsyncAnthropic, args: dict) -> tuple[dict, Usage]:
    response = await api.messages.create(**args)
    text = "".join(block.text for block in response.content if block.type == "text")
    calls = [tool_call(block.id, block.name, json.dumps(block.input))
             for block in response.content if block.type == "tool_use"]
    thinking = [_thinking(block) for block in response.content
                if block.type in ("thinking", "redacted_thinking")]
    message = assistant_message(text or None, calls, FINISH.get(response.stop_reason,
                                                                 response.stop_reason),
                                **({THINKING: thinking} if thinking else {}))
    return message, _usage(response.usage)


async def stream(api: anthropic.AsyncAnthropic, args: dict) -> AsyncIterator[dict | Usage]:
    """Chunk dicts, then the usage. Leaving early closes the HTTP response."""
    response = await api.messages.create(**args, stream=True)
    usage = Usage()
    blocks: dict[int, dict] = {}  # index -> tool_use (id, name) or thinking being streamed
    async with response:
        async for event in response:
            if event.type == "message_start":
                usage = _usage(event.message.usage)
            elif event.type == "content_block_start":
                block = event.content_block
                if block.type == "tool_use":
                    blocks[event.index] = {"id": block.id, "name": block.name}
                    yield chunk(tool_calls=[tool_call(block.id, block.name, "")])
                elif block.type in ("thinking", "redacted_thinking"):
                    blocks[event.index] = _thinking(block)
            elif event.type == "content_block_delta":
                delta = event.delta
                if delta.type == "text_delta" and delta.text:
                    yield chunk(delta.text)
                elif delta.type == "input_json_delta":
                    call = blocks[event.index]
                    yield chunk(tool_calls=[tool_call(call["id"], call["name"], delta.partial_json)])
                elif delta.type == "thinking_delta":
                    blocks[event.index]["thinking"] += delta.thinking
                elif delta.type == "signature_delta":
                    blocks[event.index]["signature"] = delta.signature
            elif event.type == "message_delta":
                usage.output_tokens = event.usage.output_tokens or 0
                thinking = [block for block in blocks.values() if "type" in block]
                yield chunk(finish_reason=FINISH.get(event.delta.stop_reason,
                                                     event.delta.stop_reason or "stop"),
                            **({THINKING: thinking} if thinking else {}))
    yield usage
