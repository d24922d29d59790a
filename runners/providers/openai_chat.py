"""Kind `openai`: any OpenAI-compatible endpoint through `AsyncOpenAI` chat completions."""

from collections.abc import AsyncIterator

import openai

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

# The request's own keys: model params cannot override them.
RESERVED = frozenset({"model", "messages", "tools", "stream", "stream_options"})

# The SDK's reasoning levels as `reasoning_effort`; `provider_default` sends none.
EFFORT = {"disabled": "none", "enabled": "medium", "minimal": "minimal", "low": "low",
          "medium": "medium", "high": "high", "xhigh": "xhigh", "max": "max"}


def client(*, base_url: str, api_key: str, timeout: float, headers: dict) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key=api_key, base_url=base_url or None, timeout=timeout,
                              max_retries=0, default_headers=headers or None)


def _content(message: Message):
    content = message.content
    if not isinstance(content, list):
        return content
    if all(element.type == "text" for element in content):
        # Many compatible servers take only a string.
        return text_of(content)
    parts = []
    for element in content:
        url = image_url(element)
        if url:
            parts.append({"type": "image_url", "image_url": {"url": url}})
        else:
            parts.append({"type": "text", "text": text_of([element])})
    return parts


def _message(message: Message) -> dict:
    role = message.role if message.role in ("system", "user", "assistant", "tool") else "user"
    out = {"role": role, "content": _content(message)}
    if role == "tool":
        out["content"] = text_of(message.content)
        out["tool_call_id"] = message.tool_call_id
    if role == "assistant" and message.tool_calls:
        out["tool_calls"] = [{"id": call.id, "type": "function",
                              "function": {"name": call.function.name,
                                           "arguments": call.function.arguments}}
                             for call in message.tool_calls]
    return out


def request(upstream_model: str, messages: list[Message], tools: list[Tool], params: dict,
            reasoning_level: str | None) -> dict:
    """`chat.completions.create` arguments; model params pass through as body fields."""
    extra = {key: value for key, value in params.items() if key not in RESERVED}
    if reasoning_level in EFFORT:
        extra["reasoning_effort"] = EFFORT[reasoning_level]
    args = {"model": upstream_model, "messages": [_message(m) for m in messages],
            "extra_body": extra}
    if tools:
        args["tools"] = [{"type": "function", "function": {
            "name": tool.name, "description": tool.description, "parameters": tool.parameters}}
            for tool in tools]
    return args


def _usage(usage) -> Usage:
    if usage is None:
        return Usage()
    details = usage.prompt_tokens_details
    return Usage(input_tokens=usage.prompt_tokens or 0, output_tokens=usage.completion_tokens or 0,
                 cached_tokens=(details.cached_tokens or 0) if details else 0)


async def complete(api: openai.AsyncOpenAI, args: dict) -> tuple[dict, Usage]:
    response = await api.chat.completions.create(**args)
    choice = response.choices[0]
    calls = [tool_call(call.id, call.function.name, call.function.arguments)
             for call in choice.message.tool_calls or [] if call.type == "function"]
    message = assistant_message(choice.message.content, calls, choice.finish_reason)
    return message, _usage(response.usage)


async def stream(api: openai.AsyncOpenAI, args: dict) -> AsyncIterator[dict | Usage]:
    """Chunk dicts, then the usage. Leaving early closes the HTTP response."""
    response = await api.chat.completions.create(
        **args, stream=True, stream_options={"include_usage": True})
    usage = Usage()
    calls: dict[int, list[str]] = {}  # index -> [id, name]: later deltas carry neither
    async with response:
        async for part in response:
            if part.usage:
                usage = _usage(part.usage)
            if not part.choices:
                continue
            choice = part.choices[0]
            deltas = []
            for delta in choice.delta.tool_calls or []:
                known = calls.setdefault(delta.index, ["", ""])
                function = delta.function
                known[0] = delta.id or known[0]
                known[1] = (function.name if function else None) or known[1]
                deltas.append(tool_call(known[0], known[1],
                                        (function.arguments if function else None) or ""))
            if choice.delta.content or deltas or choice.finish_reason:
                yield chunk(choice.delta.content, deltas, choice.finish_reason)
    yield usage


async def embed(api: openai.AsyncOpenAI, upstream_model: str,
                texts: list[str]) -> tuple[list[list[float]], Usage]:
    # Floats, not the SDK's default base64: not every compatible server speaks base64.
    response = await api.embeddings.create(model=upstream_model, input=texts,
                                           encoding_format="float")
    vectors = [item.embedding for item in sorted(response.data, key=lambda item: item.index)]
    return vectors, Usage(input_tokens=response.usage.prompt_tokens if response.usage else 0)


async def rerank(api: openai.AsyncOpenAI, upstream_model: str, query: str, documents: list[str],
                 top_n: int | None, extra: dict | None = None) -> tuple[list[dict], Usage]:
    """Jina/Cohere-style `POST /rerank`, which OpenAI-compatible servers (vLLM, Jina, Cohere,
    SiliconFlow) expose beside the OpenAI API: `[{index, relevance_score}]`, best first."""
    # The caller's provider-specific arguments first: the request's own fields win.
    body = {**(extra or {}), "model": upstream_model, "query": query, "documents": documents,
            **({"top_n": top_n} if top_n else {})}
    response = await api.post("/rerank", cast_to=object, body=body)
    if not isinstance(response, dict) or not isinstance(response.get("results"), list):
        raise ValueError("the rerank endpoint answered no `results` list")
    results = [{"index": int(item["index"]), "relevance_score": float(item["relevance_score"])}
               for item in response["results"]
               if isinstance(item, dict) and 0 <= int(item.get("index", -1)) < len(documents)]
    results.sort(key=lambda item: item["relevance_score"], reverse=True)
    tokens = (response.get("usage") or {}).get("total_tokens") or 0
    return results[:top_n] if top_n else results, Usage(input_tokens=int(tokens))
