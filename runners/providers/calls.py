"""The one way LangHost calls a model: invoke, stream, count tokens, embed, rerank.

Each call goes through its provider's official async SDK client (no SDK retries: falling back
to another model is ours, `fallback.py`), is bounded by the provider's timeout and the run's
deadline, and is recorded in the ledger as a ModelCall however it ends: ok, error, timeout
or cancelled. Closing a stream, or cancelling the task awaiting a call, closes the upstream
HTTP connection.
"""

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass, field

import anthropic
import openai
from asgiref.sync import sync_to_async

from ledger.services.model_calls import record_model_call
from runners.models import LLMModel, ModelProvider
from runners.observability import tracing
from runners.providers import anthropic_messages, openai_chat
from runners.providers.errors import ProviderError
from runners.providers.messages import parse
from runners.providers.prices import cost
from runners.providers.secrets import UnreadableKey, api_key, extra_headers
from runners.providers.tokens import estimate
from runners.providers.usage import Usage

logger = logging.getLogger(__name__)

KINDS = {ModelProvider.Kind.OPENAI: openai_chat, ModelProvider.Kind.ANTHROPIC: anthropic_messages}
# The SDKs refuse to send a request without a key; keyless (local) servers ignore this one.
NO_KEY = "no-key"

_TIMEOUTS = (TimeoutError, openai.APITimeoutError, anthropic.APITimeoutError)
_CONNECTION = (openai.APIConnectionError, anthropic.APIConnectionError)
_STATUS = (openai.APIStatusError, anthropic.APIStatusError)
_API = (openai.APIError, anthropic.APIError)


# One SDK client per provider setting and event loop: its connection pool and TLS context
# are reused, since building them for each call costs more than a local model's first token.
_clients: dict[tuple, tuple[asyncio.AbstractEventLoop, object]] = {}


def shared_client(kind, *, base_url: str, api_key: str, headers: dict, timeout: float):
    """The kind's SDK client for these settings on the running loop, with this call's timeout."""
    loop = asyncio.get_running_loop()
    key = (id(loop), kind.__name__, base_url, api_key, json.dumps(headers or {}, sort_keys=True))
    entry = _clients.get(key)
    if entry is None or entry[0] is not loop:
        for stale in [k for k, (owner, _) in _clients.items() if owner.is_closed()]:
            del _clients[stale]
        entry = _clients[key] = (loop, kind.client(base_url=base_url, api_key=api_key,
                                                   timeout=timeout, headers=headers))
    return entry[1].with_options(timeout=timeout)


@dataclass(frozen=True)
class CallInfo:
    """Who a call is for, as recorded on its ModelCall, until when it may run (`deadline`: the
    run's, epoch seconds), and where its ModelCall row goes: `journal` (the run handle's
    `journal_model_call`) takes it with the run's results, or answers False and the call
    writes it itself."""

    run_id: str = ""
    agent_id: str = ""
    project_id: str = ""
    caller: str = ""
    deadline: float | None = None
    journal: Callable[[dict], bool] | None = field(default=None, compare=False)


def _detail(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    inner = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(inner, dict) and inner.get("message"):
        return str(inner["message"])
    return getattr(exc, "message", None) or str(exc)


def _failure(exc: Exception, limit: float) -> ProviderError:
    """The ProviderError an SDK (or timeout) exception means, and whether to fall back."""
    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, _TIMEOUTS):
        detail = f"timed out after {limit:.3g} s" if limit > 0 else "the run's deadline had passed"
        return ProviderError(detail, status="timeout", retryable=True)
    if isinstance(exc, _CONNECTION):
        return ProviderError(f"connection error: {exc.__cause__ or _detail(exc)}", retryable=True)
    if isinstance(exc, _STATUS):
        code = exc.status_code
        # A 2xx status here is an error event inside a stream (e.g. overloaded): transient.
        retryable = code in (408, 429) or code >= 500 or code < 400
        return ProviderError(f"HTTP {code}: {_detail(exc)}", retryable=retryable)
    if isinstance(exc, _API):
        return ProviderError(_detail(exc), retryable=True)
    if isinstance(exc, UnreadableKey):
        return ProviderError(str(exc))
    return ProviderError(f"{type(exc).__name__}: {exc}")


class _Attempt:
    """One call being made: its client options, timing and usage, recorded when it ends."""

    def __init__(self, model: LLMModel, call: CallInfo, operation: str, attempt: int,
                 messages=None):
        provider = model.provider
        self.model = model
        self.messages = messages  # for a trace that may show them
        self.journal = call.journal
        self.row = {
            "run_id": call.run_id, "agent_id": call.agent_id, "project_id": call.project_id,
            "caller": call.caller, "model_id": str(model.pk), "model_name": model.name,
            "provider_name": provider.name, "upstream_model": model.upstream_model,
            "operation": operation, "attempt": attempt,
        }
        self.started = time.monotonic()
        self.began_at = time.time()
        self.first_token_ms: int | None = None
        self.usage = Usage()
        limit = provider.timeout
        if call.deadline is not None:
            limit = min(limit, call.deadline - time.time())
        self.limit = limit
        self.key = ""

    def client(self, kind):
        provider = self.model.provider
        if self.limit <= 0:
            raise TimeoutError  # the run's deadline passed before the call could start
        self.key = api_key(provider)
        return shared_client(kind, base_url=provider.base_url, api_key=self.key or NO_KEY,
                             headers=extra_headers(provider), timeout=self.limit)

    def token(self) -> None:
        if self.first_token_ms is None:
            self.first_token_ms = self._elapsed_ms()

    def _elapsed_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)

    def scrub(self, text: str) -> str:
        return text.replace(self.key, "***") if self.key else text

    async def end(self, status: str, error: str = "") -> None:
        usage = self.usage
        row = {**self.row, "status": status, "error": error,
               "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
               "cached_tokens": usage.cached_tokens, "cost": cost(self.model, usage),
               "latency_ms": self._elapsed_ms(), "first_token_ms": self.first_token_ms}
        tracing.model_call(row, self.model.provider.kind, self.began_at, self.messages)
        try:
            if not (self.journal and self.journal(row)):
                await record_model_call(**row)
        except Exception:  # the caller's answer matters more than its ledger row
            logger.exception("Could not record a call to model %s", self.model.name)


@asynccontextmanager
async def _recorded(model: LLMModel, call: CallInfo, operation: str,
                    attempt: int, messages=None) -> AsyncIterator[_Attempt]:
    record = _Attempt(model, call, operation, attempt, messages)
    try:
        yield record
        await record.end("ok")
    except (asyncio.CancelledError, GeneratorExit):
        await record.end("cancelled", "cancelled")
        raise
    except Exception as exc:
        failure = _failure(exc, record.limit)
        message = record.scrub(str(failure))
        # A traceback only for what no provider explains: a bug of ours.
        unexpected = not isinstance(exc, (*_TIMEOUTS, *_API, ProviderError, UnreadableKey))
        logger.warning("Call to model %s failed (%s): %s", model.name, failure.status, message,
                       exc_info=unexpected)
        await record.end(failure.status, message)
        # Not chained: the SDK's exception may quote the key back from the provider.
        raise ProviderError(message, status=failure.status,
                            retryable=failure.retryable) from None


async def _load_provider(model: LLMModel) -> None:
    if not LLMModel.provider.is_cached(model):
        await sync_to_async(lambda: model.provider)()


async def _prepared(model, messages, tools, params, reasoning_level):
    await _load_provider(model)
    kind = KINDS[model.provider.kind]
    messages, tools = parse(messages, tools)
    return kind, kind.request(model.upstream_model, messages, tools, params or {}, reasoning_level)


async def invoke(model: LLMModel, messages: Iterable, *, tools: Iterable | None = None,
                 params: dict | None = None, reasoning_level: str | None = None,
                 call: CallInfo, attempt: int = 1) -> tuple[dict, dict]:
    """One completion: `(message, usage)` in the SDK's Message and LLMTokenUsage shapes.

    `messages`/`tools`: SDK `Message`/`LLMTool` objects or their dicts; `params`: model
    params (temperature, max_tokens, top_p, stop, ...); `reasoning_level`: the SDK's level.
    Raises ProviderError.
    """
    kind, args = await _prepared(model, messages, tools, params, reasoning_level)
    async with _recorded(model, call, "invoke", attempt, args.get("messages")) as record:
        async with asyncio.timeout(record.limit):
            message, record.usage = await kind.complete(record.client(kind), args)
        record.token()
    return message, record.usage.as_dict()


async def stream(model: LLMModel, messages: Iterable, *, tools: Iterable | None = None,
                 params: dict | None = None, reasoning_level: str | None = None,
                 call: CallInfo, attempt: int = 1) -> AsyncIterator[dict]:
    """A streamed completion: `{"chunk": MessageChunk dict}` events, then `{"usage": ...}`.

    Close it early (`aclosing`, or cancel the task reading it) and the upstream request is
    closed and recorded as cancelled. Raises ProviderError.
    """
    kind, args = await _prepared(model, messages, tools, params, reasoning_level)
    async with _recorded(model, call, "stream", attempt, args.get("messages")) as record:
        # The time limit covers the whole stream, but only while waiting on the provider:
        # a timeout scope must not span a yield to the consumer.
        until = asyncio.get_running_loop().time() + record.limit
        async with aclosing(kind.stream(record.client(kind), args)) as events:
            while True:
                async with asyncio.timeout_at(until):
                    item = await anext(events, None)
                if item is None:
                    break
                if isinstance(item, Usage):
                    record.usage = item
                    continue
                record.token()
                yield {"chunk": item}
    yield {"usage": record.usage.as_dict()}


async def count_tokens(model: LLMModel, messages: Iterable, tools: Iterable | None = None) -> int:
    """Input tokens of a request: Anthropic's count endpoint for anthropic providers, else
    (or if it fails) the offline estimate of `tokens.py`."""
    await _load_provider(model)
    provider = model.provider
    parsed, parsed_tools = parse(messages, tools)
    if provider.kind == ModelProvider.Kind.ANTHROPIC:
        args = anthropic_messages.request(model.upstream_model, parsed, parsed_tools, {}, None)
        try:
            api = shared_client(anthropic_messages, base_url=provider.base_url,
                                api_key=api_key(provider) or NO_KEY,
                                headers=extra_headers(provider), timeout=provider.timeout)
            async with asyncio.timeout(provider.timeout):
                counted = await api.messages.count_tokens(**anthropic_messages.count_args(args))
            return counted.input_tokens
        except Exception as exc:
            logger.warning("Token count of provider %s failed (%s); estimating instead",
                           provider.name, type(exc).__name__)
    return estimate(parsed, parsed_tools)


async def invoke_embedding(model: LLMModel, texts: list[str], *, call: CallInfo,
                           attempt: int = 1) -> list[list[float]]:
    """One vector per text, from an OpenAI-compatible embeddings endpoint."""
    await _load_provider(model)
    if model.provider.kind != ModelProvider.Kind.OPENAI:
        raise ProviderError(f"provider '{model.provider.name}' has no embeddings API")
    async with _recorded(model, call, "embedding", attempt) as record:
        async with asyncio.timeout(record.limit):
            vectors, record.usage = await openai_chat.embed(record.client(openai_chat),
                                                            model.upstream_model, texts)
    return vectors


async def invoke_rerank(model: LLMModel, query: str, documents: list[str], *, call: CallInfo,
                        top_n: int | None = None, extra: dict | None = None,
                        attempt: int = 1) -> list[dict]:
    """`documents` scored against `query`: `[{index, relevance_score}]`, best first; `extra`:
    provider-specific fields of the request (the SDK's `extra_args`)."""
    await _load_provider(model)
    if model.provider.kind != ModelProvider.Kind.OPENAI:
        raise ProviderError(f"provider '{model.provider.name}' has no rerank API")
    if not documents:
        return []
    async with _recorded(model, call, "rerank", attempt) as record:
        async with asyncio.timeout(record.limit):
            try:
                results, record.usage = await openai_chat.rerank(
                    record.client(openai_chat), model.upstream_model, query, documents, top_n,
                    extra)
            except (ValueError, KeyError, TypeError) as exc:
                raise ProviderError(f"the rerank answer is malformed: {exc}") from None
    return results


async def probe(model: LLMModel) -> dict:
    """A one-token call (one text for embedding models): `{"ok": True, "latency_ms"}` or
    `{"ok": False, "error"}` with the provider's error. Recorded like any call."""
    call = CallInfo(caller="connection test")
    started = time.monotonic()
    try:
        if model.model_type == LLMModel.Type.EMBEDDING:
            await invoke_embedding(model, ["ping"], call=call)
        elif model.model_type == LLMModel.Type.RERANK:
            await invoke_rerank(model, "ping", ["ping"], call=call)
        else:
            await invoke(model, [{"role": "user", "content": "ping"}],
                         params={"max_tokens": 1}, call=call)
    except ProviderError as exc:
        return {"ok": False, "error": str(exc)}
    return {"ok": True, "latency_ms": int((time.monotonic() - started) * 1000)}


async def upstream_models(provider: ModelProvider) -> list[dict]:
    """The models the provider's API lists (`GET /models`): `[{id, name, context_window}]`
    (the window when the API says it, as Anthropic's does). Raises ProviderError."""
    api = shared_client(KINDS[provider.kind], base_url=provider.base_url,
                        api_key=api_key(provider) or NO_KEY, headers=extra_headers(provider),
                        timeout=provider.timeout)
    try:
        async with asyncio.timeout(provider.timeout):
            return [{"id": model.id,
                     "name": getattr(model, "display_name", None) or model.id,
                     "context_window": getattr(model, "max_input_tokens", None)}
                    async for model in api.models.list()]
    except Exception as exc:
        raise _failure(exc, provider.timeout) from exc
