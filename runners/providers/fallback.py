"""Fallback: the primary model, then each fallback in order, while failures are transient.

A model is tried next when the one before failed with a connection error, a timeout, 429 or
5xx (`ProviderError.retryable`); any other error is the answer. A stream commits to its model
at the first chunk: a failure after it is raised, never retried elsewhere (the consumer
already has part of the answer). Each attempt is its own ModelCall (`attempt` 1, 2, ...).
"""

import time
from collections.abc import AsyncIterator, Iterable
from contextlib import aclosing

from runners.models import LLMModel
from runners.providers import calls
from runners.providers.calls import CallInfo
from runners.providers.errors import ModelsUnavailable, ProviderError


def _deadline_passed(call: CallInfo) -> bool:
    return call.deadline is not None and time.time() >= call.deadline


async def with_fallback(models: list[LLMModel], messages: Iterable, *,
                        tools: Iterable | None = None, params: dict | None = None,
                        reasoning_level: str | None = None,
                        call: CallInfo) -> tuple[dict, dict]:
    """`calls.invoke` on the first model that answers: `(message, usage)`.

    Raises ModelsUnavailable (`model.unavailable: <model>: <error>; ...`) when none does.
    """
    messages, tools = list(messages), list(tools or [])
    errors = []
    for attempt, model in enumerate(models, start=1):
        try:
            return await calls.invoke(model, messages, tools=tools, params=params,
                                      reasoning_level=reasoning_level, call=call,
                                      attempt=attempt)
        except ProviderError as exc:
            if not exc.retryable:
                raise
            errors.append(f"{model.name}: {exc}")
            if _deadline_passed(call):
                break
    raise ModelsUnavailable(errors)


async def stream_with_fallback(models: list[LLMModel], messages: Iterable, *,
                               tools: Iterable | None = None, params: dict | None = None,
                               reasoning_level: str | None = None,
                               call: CallInfo) -> AsyncIterator[dict]:
    """`calls.stream` events from the first model that starts answering.

    Raises ModelsUnavailable when no model starts; a model's failure after its first chunk
    is raised as its own ProviderError.
    """
    messages, tools = list(messages), list(tools or [])
    errors = []
    for attempt, model in enumerate(models, start=1):
        committed = False
        try:
            async with aclosing(calls.stream(model, messages, tools=tools, params=params,
                                             reasoning_level=reasoning_level, call=call,
                                             attempt=attempt)) as events:
                async for event in events:
                    committed = True
                    yield event
            return
        except ProviderError as exc:
            if committed or not exc.retryable:
                raise
            errors.append(f"{model.name}: {exc}")
            if _deadline_passed(call):
                break
    raise ModelsUnavailable(errors)
