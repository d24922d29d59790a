"""Model providers: the one layer that calls models, on the official async SDKs.

`calls` (CallInfo; invoke, stream, count_tokens, invoke_embedding, invoke_rerank, probe),
`fallback`
(with_fallback, stream_with_fallback), `errors` (ProviderError, ModelsUnavailable), `secrets`
(API keys at rest), `prices` (cost, genai-prices prefill), `lookup` (models by name). Every
call is recorded in the ledger as a ModelCall.

Nothing is re-exported here: `calls` imports both SDKs (about a second), which pages that
only read or write providers' settings should not pay for. Code a web process loads at start
reaches it through `load_calls()`, on its first model call; code on the event loop through
`load_calls_off_the_loop()`.
"""

import asyncio
from types import ModuleType

_calls: ModuleType | None = None


def load_calls() -> ModuleType:
    """`runners.providers.calls`, imported on first use."""
    from runners.providers import calls

    return calls


async def load_calls_off_the_loop() -> ModuleType:
    """`load_calls()`, the first time on a worker thread: the seconds the SDKs take to load
    hold up no other request or run of the loop."""
    global _calls
    if _calls is None:
        _calls = await asyncio.to_thread(load_calls)
    return _calls
