import pytest

from runners.models import LLMModel, ModelProvider
from runners.providers.secrets import set_api_key
from tests.fake_providers import *  # noqa: F403  (openai_server, anthropic_server)

# Searched for in every response, page, log and ledger row: it must never show up.
API_KEY = "sk-test-never-shown-7Qx2"


@pytest.fixture
def make_model(db):
    """`make_model(server, name, **fields)`: an LLMModel on a provider of the fake server."""

    def make(server, name, upstream_model=None, **fields):
        provider, created = ModelProvider.objects.get_or_create(
            name=f"fake-{server.kind}-{server.port}",
            defaults={"kind": server.kind, "base_url": server.base_url, "timeout": 30})
        if created:
            set_api_key(provider, API_KEY)
            provider.save()
        fields.setdefault("input_price_per_mtok", 2)
        fields.setdefault("output_price_per_mtok", 8)
        fields.setdefault("cached_price_per_mtok", 1)
        return LLMModel.objects.select_related("provider").get(pk=LLMModel.objects.create(
            name=name, provider=provider, upstream_model=upstream_model or f"{name}-upstream",
            **fields).pk)

    return make


@pytest.fixture
def openai_model(make_model, openai_server):
    return make_model(openai_server, "gpt-fake")


@pytest.fixture
def anthropic_model(make_model, anthropic_server):
    return make_model(anthropic_server, "claude-fake")


@pytest.fixture(params=["openai", "anthropic"])
def kind(request):
    """Run a test once per provider kind (with `server` and `model`)."""
    return request.param


@pytest.fixture
def server(request, kind):
    return request.getfixturevalue(f"{kind}_server")


@pytest.fixture
def model(request, kind):
    return request.getfixturevalue(f"{kind}_model")
