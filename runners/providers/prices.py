"""What calls cost: the model's prices per million tokens, and its context window, prefilled
from genai-prices."""

from decimal import Decimal

from genai_prices import Usage as PricedUsage
from genai_prices import calc_price

from runners.models import LLMModel, ModelProvider
from runners.providers.usage import Usage

PRICE_FIELDS = ("input_price_per_mtok", "output_price_per_mtok", "cached_price_per_mtok")
_MILLION = Decimal(1_000_000)
# Priced at a thousand tokens, then scaled: a million would land in long-context price tiers.
_SAMPLE = 1000


def cost(model: LLMModel, usage: Usage) -> Decimal:
    """Uncached input, cached input and output at the model's prices; cached tokens at the
    input price when the model has no cached price."""
    cached_price = model.cached_price_per_mtok or model.input_price_per_mtok
    uncached = max(usage.input_tokens - usage.cached_tokens, 0)
    return (Decimal(uncached) * Decimal(model.input_price_per_mtok)
            + Decimal(usage.cached_tokens) * Decimal(cached_price)
            + Decimal(usage.output_tokens) * Decimal(model.output_price_per_mtok)) / _MILLION


def _hints(provider: ModelProvider | None) -> list[dict]:
    """Where to look the model up: the provider first, then wherever the name matches
    (an OpenAI-compatible proxy serving gpt-4o-mini charges like OpenAI)."""
    if provider is None:
        return [{}]
    if provider.kind == ModelProvider.Kind.ANTHROPIC:
        return [{"provider_id": "anthropic"}, {}]
    if provider.base_url:
        return [{"provider_api_url": provider.base_url}, {}]
    return [{"provider_id": "openai"}, {}]


def known_facts(upstream_model: str, provider: ModelProvider | None = None) -> dict | None:
    """What genai-prices knows of the model: `prices` (`{field: Decimal}` per million tokens)
    and `context_window` (None when it does not say); None if it does not know the model."""
    def price(hint: dict, **tokens):
        return calc_price(PricedUsage(**tokens), upstream_model, **hint)

    for hint in _hints(provider):
        try:
            priced_input = price(hint, input_tokens=_SAMPLE)
            output_price = price(hint, output_tokens=_SAMPLE).output_price
            cached_price = price(hint, input_tokens=_SAMPLE, cache_read_tokens=_SAMPLE).input_price
        except (LookupError, ValueError):
            continue
        scale = Decimal(1_000_000 // _SAMPLE)
        return {"prices": {field: (value * scale).quantize(Decimal("0.000001"))
                           for field, value in zip(
                               PRICE_FIELDS, (priced_input.input_price, output_price,
                                              cached_price), strict=True)},
                "context_window": priced_input.model.context_window}
    return None


def known_prices(upstream_model: str, provider: ModelProvider | None = None) -> dict | None:
    """`{field: Decimal}` per million tokens from genai-prices, or None if it does not know
    the model."""
    facts = known_facts(upstream_model, provider)
    return facts["prices"] if facts else None


def prefill(model: LLMModel, *, prices: bool = True, window: bool = True) -> list[str]:
    """Fill what genai-prices knows of a new model: its prices when it has none (`prices`),
    its context window (`window`: the one given was left to the default); what was filled."""
    if prices and any(getattr(model, field) for field in PRICE_FIELDS):
        prices = False
    facts = known_facts(model.upstream_model, model.provider) if prices or window else None
    if facts is None:
        return []
    filled = []
    if prices:
        for field, value in facts["prices"].items():
            setattr(model, field, value)
        filled.append("prices")
    if window and facts["context_window"]:
        model.context_window = facts["context_window"]
        filled.append("context window")
    return filled
