"""Keys at rest and prices: encryption under SECRET_KEY, the environment fallback, genai-prices
prefill and the cost of a call."""

from decimal import Decimal

import pytest

from runners.models import LLMModel, ModelProvider
from runners.providers.prices import cost, known_prices, prefill
from runners.providers.secrets import UnreadableKey, api_key, set_api_key
from runners.providers.usage import Usage


def test_a_stored_key_is_encrypted_and_reads_back():
    provider = ModelProvider(name="p")

    set_api_key(provider, "  sk-abc123  ")

    assert "sk-abc123" not in provider.api_key_encrypted
    assert api_key(provider) == "sk-abc123"
    assert provider.has_api_key
    set_api_key(provider, "")
    assert provider.api_key_encrypted == "" and api_key(provider) == ""


def test_a_key_stored_under_another_secret_key_is_unreadable(settings):
    provider = ModelProvider(name="p")
    set_api_key(provider, "sk-abc123")
    settings.SECRET_KEY = "another secret key entirely, at least fifty characters long!!"

    with pytest.raises(UnreadableKey, match="set it again"):
        api_key(provider)


def test_without_a_stored_key_the_environment_variable_is_read(monkeypatch):
    provider = ModelProvider(name="p", api_key_env="LANGHOST_PROVIDER_TEST_KEY")
    monkeypatch.setenv("LANGHOST_PROVIDER_TEST_KEY", "sk-from-env")

    assert api_key(provider) == "sk-from-env"
    assert provider.has_api_key


def test_a_variable_outside_the_providers_prefix_is_never_read(monkeypatch):
    # A row written before the prefix was enforced, or past the validators.
    provider = ModelProvider(name="p", api_key_env="DJANGO_SECRET_KEY")
    monkeypatch.setenv("DJANGO_SECRET_KEY", "the host's own secret")

    with pytest.raises(UnreadableKey, match="must start with LANGHOST_PROVIDER_"):
        api_key(provider)


def test_genai_prices_knows_common_models_per_million_tokens():
    anthropic = ModelProvider(name="a", kind="anthropic")

    assert known_prices("gpt-4o-mini") == {
        "input_price_per_mtok": Decimal("0.15"), "output_price_per_mtok": Decimal("0.6"),
        "cached_price_per_mtok": Decimal("0.075")}
    # A thousand-token sample keeps long-context tiers out of the base price.
    assert known_prices("claude-sonnet-4-5", anthropic)["input_price_per_mtok"] == Decimal(3)
    assert known_prices("my-own-finetune") is None


def test_prefill_leaves_a_priced_model_alone():
    provider = ModelProvider(name="p", kind="openai")
    priced = LLMModel(provider=provider, upstream_model="gpt-4o", input_price_per_mtok=1)
    unpriced = LLMModel(provider=provider, upstream_model="gpt-4o")

    assert prefill(priced, window=False) == [] and priced.output_price_per_mtok == 0
    assert prefill(unpriced, window=False) == ["prices"]
    assert unpriced.input_price_per_mtok == Decimal("2.5")


def test_prefill_sets_the_context_window_genai_prices_knows():
    provider = ModelProvider(name="p", kind="openai")
    known = LLMModel(provider=provider, upstream_model="gpt-4o-mini")
    unknown = LLMModel(provider=provider, upstream_model="my-own-finetune")

    assert prefill(known) == ["prices", "context window"] and known.context_window == 128_000
    assert prefill(unknown) == [] and unknown.context_window == 8192


def test_cost_charges_cached_tokens_at_the_cached_price_or_else_the_input_price():
    model = LLMModel(input_price_per_mtok=Decimal(3), output_price_per_mtok=Decimal(15),
                     cached_price_per_mtok=Decimal("0.3"))
    usage = Usage(input_tokens=1_000_000, output_tokens=100_000, cached_tokens=500_000)

    assert cost(model, usage) == Decimal("1.5") + Decimal("0.15") + Decimal("1.5")
    model.cached_price_per_mtok = Decimal(0)
    assert cost(model, usage) == Decimal(3) + Decimal("1.5")
