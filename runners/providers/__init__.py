"""Model providers: the one layer that calls models, on the official async SDKs.

`calls` (CallInfo; invoke, stream, count_tokens, invoke_embedding, invoke_rerank, probe),
`fallback`
(with_fallback, stream_with_fallback), `errors` (ProviderError, ModelsUnavailable), `secrets`
(API keys at rest), `prices` (cost, genai-prices prefill), `lookup` (models by name). Every
call is recorded in the ledger as a ModelCall.

Nothing is re-exported here: `calls` imports both SDKs (about a second), which pages that
only read or write providers' settings should not pay for. Code a web process loads at start
reaches it through `load_calls()`, on its first model call.
"""

from types import ModuleType


def load_calls() -> ModuleType:
    """`runners.providers.calls`, imported on first use."""
    from runners.providers import calls

    return calls
