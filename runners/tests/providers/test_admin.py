"""Admin: the provider's key is write-only, models are prefilled with prices and tested from
their list, agent types show the model names nobody registered."""

import pytest

from runners.models import LLMModel, ModelProvider
from runners.providers.secrets import api_key
from runners.tests.providers.conftest import API_KEY
from tests.fake_providers import Reply

pytestmark = pytest.mark.django_db

PROVIDERS = "/admin/runners/modelprovider/"
MODELS = "/admin/runners/llmmodel/"


def provider_form(**fields):
    return {"name": "main", "kind": "openai", "base_url": "http://127.0.0.1:9/v1",
            "api_key": "", "api_key_env": "", "timeout": "30", "extra_headers": "", **fields}


def test_the_key_field_never_renders_the_stored_key(admin_browser):
    response = admin_browser.post(f"{PROVIDERS}add/", provider_form(api_key=API_KEY))
    assert response.status_code == 302, response.content.decode()[:2000]
    provider = ModelProvider.objects.get()
    assert api_key(provider) == API_KEY

    page = admin_browser.get(f"{PROVIDERS}{provider.pk}/change/").content.decode()
    listing = admin_browser.get(PROVIDERS).content.decode()

    assert 'type="password"' in page and 'name="api_key"' in page
    assert API_KEY not in page and provider.api_key_encrypted not in page
    assert "stored (encrypted)" in page and "stored (encrypted)" in listing
    assert API_KEY not in listing


def test_a_blank_key_keeps_the_stored_one_and_remove_drops_it(admin_browser):
    admin_browser.post(f"{PROVIDERS}add/", provider_form(api_key=API_KEY))
    provider = ModelProvider.objects.get()
    change = f"{PROVIDERS}{provider.pk}/change/"

    admin_browser.post(change, provider_form(timeout="12"))
    provider.refresh_from_db()
    assert (provider.timeout, api_key(provider)) == (12.0, API_KEY)

    admin_browser.post(change, provider_form(remove_api_key="on"))
    provider.refresh_from_db()
    assert provider.api_key_encrypted == "" and not provider.has_api_key


def test_a_new_model_without_prices_is_prefilled(admin_browser, make_model, openai_server):
    provider = make_model(openai_server, "gpt-fake").provider

    response = admin_browser.post(f"{MODELS}add/", {
        "name": "mini", "provider": str(provider.pk), "upstream_model": "gpt-4o-mini",
        "model_type": "chat", "abilities": "[]", "context_window": "",
        "input_price_per_mtok": "0", "output_price_per_mtok": "0", "cached_price_per_mtok": "0",
        "is_active": "on"}, follow=True)

    assert "Prices and context window of gpt-4o-mini filled in from genai-prices" in \
        response.content.decode()
    model = LLMModel.objects.get(name="mini")
    assert (float(model.input_price_per_mtok), float(model.output_price_per_mtok)) == (0.15, 0.6)
    assert model.context_window == 128_000


def test_test_connection_reports_latency_or_the_providers_error(admin_browser, make_model,
                                                                openai_server):
    good = make_model(openai_server, "gpt-good")
    bad = make_model(openai_server, "gpt-bad")
    openai_server.script(Reply(status=500, error="model is down"))  # models list in name order

    response = admin_browser.post(MODELS, {"action": "test_connection",
                                           "_selected_action": [str(bad.pk), str(good.pk)]},
                                  follow=True)

    page = response.content.decode()
    assert "Test of gpt-bad: HTTP 500: model is down" in page
    assert "Test of gpt-good: answered in" in page
    assert API_KEY not in page


def test_agent_type_page_shows_unknown_models(admin_browser, make_agent_type, make_model,
                                              openai_server):
    make_model(openai_server, "gpt-fake")
    agent_type = make_agent_type(primary_model="gpt-fake", fallback_models=["nope", "gpt-fake"])

    page = admin_browser.get(f"/admin/runners/agenttype/{agent_type.pk}/change/").content.decode()

    assert "unknown models" in page.lower()
    assert "nope" in page


def test_the_provider_page_lists_its_models_and_imports_those_picked(
        admin_browser, make_model, openai_server):
    provider = make_model(openai_server, "gpt-fake").provider
    openai_server.models = [("gpt-4o-mini", None), ("gpt-4o", None)]
    url = f"{PROVIDERS}{provider.pk}/upstream-models/"
    assert url in admin_browser.get(f"{PROVIDERS}{provider.pk}/change/").content.decode()

    page = admin_browser.get(url).content.decode()
    admin_browser.post(url, {"ids": ["gpt-4o"]})

    assert 'value="gpt-4o-mini"' in page and 'value="gpt-4o"' in page
    assert LLMModel.objects.filter(provider=provider).count() == 2
    assert LLMModel.objects.get(name="gpt-4o").context_window == 128_000
