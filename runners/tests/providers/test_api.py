"""REST: model providers (superusers only, write-only key) and models (everyone signed in reads,
superusers write and test)."""

import pytest

from ledger.models import ModelCall
from runners.models import LLMModel, ModelProvider
from runners.providers.secrets import api_key
from runners.tests.providers.conftest import API_KEY
from tests.fake_providers import Reply

pytestmark = pytest.mark.django_db

PROVIDERS = "/api/v1/model-providers"
MODELS = "/api/v1/models"


def new_provider(client, **fields):
    body = {"name": "openai-main", "kind": "openai", "base_url": "https://api.openai.com/v1",
            "api_key": API_KEY, **fields}
    return client.post(PROVIDERS, body, format="json")


def test_only_superusers_reach_providers(user_client, anon_client):
    assert user_client.get(PROVIDERS).status_code == 403
    assert new_provider(user_client).status_code == 403
    assert anon_client.get(PROVIDERS).status_code == 401
    assert not ModelProvider.objects.exists()


def test_a_created_provider_has_a_key_it_never_shows(superuser_client):
    response = new_provider(superuser_client, timeout=20, extra_headers={"X-Team": "blue"})

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["has_api_key"] is True
    assert "api_key" not in body and "api_key_encrypted" not in body
    assert (body["timeout"], body["extra_header_names"]) == (20.0, ["X-Team"])
    assert "extra_headers" not in body
    provider = ModelProvider.objects.get()
    assert API_KEY not in provider.api_key_encrypted
    assert api_key(provider) == API_KEY
    listed = superuser_client.get(PROVIDERS)
    assert set(listed.json()) == {"data", "pagination"}
    assert API_KEY not in listed.content.decode()
    assert API_KEY not in superuser_client.get(f"{PROVIDERS}/{provider.pk}").content.decode()


def test_patching_without_a_key_keeps_it_and_an_empty_key_removes_it(superuser_client):
    provider_id = new_provider(superuser_client).json()["id"]
    url = f"{PROVIDERS}/{provider_id}"

    assert superuser_client.patch(url, {"timeout": 5}, format="json").json()["has_api_key"]
    assert api_key(ModelProvider.objects.get()) == API_KEY

    assert superuser_client.patch(url, {"api_key": ""}, format="json").json()["has_api_key"] is False
    body = superuser_client.patch(url, {"api_key_env": "LANGHOST_PROVIDER_OPENAI"},
                                  format="json").json()
    assert body["has_api_key"] is True  # from the environment


@pytest.mark.parametrize("field, value", [
    ("kind", "gemini"), ("timeout", 0), ("base_url", "not a url"), ("extra_headers", ["x"]),
    ("extra_headers", {"not a header": "x"}), ("api_key_env", "DJANGO_SECRET_KEY"),
    ("api_key_env", "LANGHOST_PROVIDER_"), ("api_key_env", "OPENAI_API_KEY"),
])
def test_invalid_provider_fields_are_named(superuser_client, field, value):
    response = new_provider(superuser_client, **{field: value})

    assert response.status_code == 400
    assert field in response.json()["errors"]


def test_a_provider_with_models_cannot_be_deleted(superuser_client, make_model, openai_server):
    model = make_model(openai_server, "gpt-fake")

    response = superuser_client.delete(f"{PROVIDERS}/{model.provider_id}")

    assert response.status_code == 409
    model.delete()
    assert superuser_client.delete(f"{PROVIDERS}/{model.provider_id}").status_code == 204


def test_users_read_models_and_superusers_write_them(user_client, superuser_client,
                                                     make_model, openai_server):
    model = make_model(openai_server, "gpt-fake")
    body = {"name": "gpt-new", "provider_id": str(model.provider_id), "upstream_model": "x-1",
            "model_type": "chat", "abilities": ["tools", "vision"], "context_window": 128000,
            "input_price_per_mtok": "1.5", "output_price_per_mtok": 6,
            "cached_price_per_mtok": 0.5, "is_active": True}

    listed = user_client.get(MODELS).json()
    assert [m["name"] for m in listed["data"]] == ["gpt-fake"]
    assert listed["data"][0]["provider_name"] == model.provider.name
    assert user_client.post(MODELS, body, format="json").status_code == 403
    assert user_client.post(f"{MODELS}/{model.pk}/test").status_code == 403

    created = superuser_client.post(MODELS, body, format="json")
    assert created.status_code == 201, created.content
    data = created.json()
    assert {key: data[key] for key in body} == {**body, "input_price_per_mtok": 1.5}
    url = f"{MODELS}/{data['id']}"
    assert superuser_client.patch(url, {"is_active": False}, format="json").json()["is_active"] is False
    assert superuser_client.delete(url).status_code == 204


@pytest.mark.parametrize("field, value", [
    ("provider_id", "00000000-0000-0000-0000-000000000000"), ("abilities", ["telepathy"]),
    ("model_type", "vision"), ("input_price_per_mtok", -1), ("context_window", 0),
])
def test_invalid_model_fields_are_named(superuser_client, make_model, openai_server, field, value):
    provider_id = str(make_model(openai_server, "gpt-fake").provider_id)
    body = {"name": "m", "provider_id": provider_id, "upstream_model": "m", field: value}

    response = superuser_client.post(MODELS, body, format="json")

    assert response.status_code == 400
    assert field in response.json()["errors"]


def test_a_model_created_without_prices_takes_genai_prices(superuser_client, make_model,
                                                           openai_server):
    provider_id = str(make_model(openai_server, "gpt-fake").provider_id)

    known = superuser_client.post(MODELS, {"name": "mini", "provider_id": provider_id,
                                           "upstream_model": "gpt-4o-mini"}, format="json").json()
    unknown = superuser_client.post(MODELS, {"name": "local", "provider_id": provider_id,
                                             "upstream_model": "my-finetune"}, format="json").json()
    priced = superuser_client.post(MODELS, {"name": "mine", "provider_id": provider_id,
                                            "upstream_model": "gpt-4o-mini",
                                            "input_price_per_mtok": 9}, format="json").json()

    assert (known["input_price_per_mtok"], known["output_price_per_mtok"],
            known["cached_price_per_mtok"]) == (0.15, 0.6, 0.075)
    assert unknown["input_price_per_mtok"] == 0
    assert (priced["input_price_per_mtok"], priced["output_price_per_mtok"]) == (9, 0)
    # The context window too, unless given; 8192 when genai-prices does not know the model.
    assert (known["context_window"], priced["context_window"], unknown["context_window"]) == (
        128_000, 128_000, 8192)
    given = superuser_client.post(MODELS, {"name": "small", "provider_id": provider_id,
                                           "upstream_model": "gpt-4o-mini",
                                           "context_window": 16_000}, format="json").json()
    assert given["context_window"] == 16_000


def test_testing_a_model_answers_its_latency_or_the_providers_error(
        superuser_client, openai_model, openai_server):
    url = f"{MODELS}/{openai_model.pk}/test"

    ok = superuser_client.post(url)
    openai_server.script(Reply(status=500, error="model is down"))
    failed = superuser_client.post(url)

    assert ok.status_code == 200 and ok.json()["ok"] is True
    assert isinstance(ok.json()["latency_ms"], int)
    assert openai_server.calls()[0].body["max_tokens"] == 1
    assert failed.status_code == 200
    assert failed.json() == {"ok": False, "error": "HTTP 500: model is down"}
    assert list(ModelCall.objects.values_list("caller", "status")) == [
        ("connection test", "error"), ("connection test", "ok")]


def test_agent_types_accept_unknown_model_names_and_flag_them(superuser_client, user_client,
                                                             make_model, openai_server):
    make_model(openai_server, "gpt-fake")
    body = {"name": "Helper", "slug": "helper", "primary_model": "gpt-fake",
            "fallback_models": ["claude-nope", "gpt-fake", "mystery"]}

    created = superuser_client.post("/api/v1/agent-types", body, format="json")

    assert created.status_code == 201
    assert created.json()["unknown_models"] == ["claude-nope", "mystery"]
    listed = user_client.get("/api/v1/agent-types").json()["data"]
    assert listed[0]["unknown_models"] == ["claude-nope", "mystery"]
    patched = superuser_client.patch(f"/api/v1/agent-types/{created.json()['id']}",
                                     {"fallback_models": []}, format="json")
    assert patched.json()["unknown_models"] == []
    assert LLMModel.objects.count() == 1


def test_extra_headers_reach_the_provider_but_no_response_or_page(superuser_client,
                                                                 admin_browser, openai_server):
    secret = "Bearer team-secret-4471"
    created = new_provider(superuser_client, base_url=openai_server.base_url,
                           extra_headers={"X-Upstream-Auth": secret}).json()
    model = superuser_client.post(MODELS, {
        "name": "gpt-headers", "provider_id": created["id"], "upstream_model": "gpt-x",
        "model_type": "chat"}, format="json").json()
    openai_server.script(Reply(text="pong"))

    tested = superuser_client.post(f"{MODELS}/{model['id']}/test", format="json")

    assert tested.json()["ok"] is True, tested.json()
    assert openai_server.calls()[-1].headers["x-upstream-auth"] == secret
    shown = [superuser_client.get(PROVIDERS).content.decode(),
             superuser_client.get(f"{PROVIDERS}/{created['id']}").content.decode(),
             superuser_client.get(f"{PROVIDERS}/{created['id']}",
                                  HTTP_ACCEPT="text/html").content.decode(),
             admin_browser.get(f"/admin/runners/modelprovider/{created['id']}/change/")
             .content.decode()]
    assert all(secret not in page and "team-secret" not in page for page in shown)
    assert "X-Upstream-Auth" in shown[-1]  # the name, as a set header


def test_a_provider_test_sends_no_variable_outside_the_prefix(superuser_client, openai_server,
                                                             monkeypatch):
    monkeypatch.setenv("DJANGO_SECRET_KEY", "the-host-secret-9c1")
    provider = ModelProvider.objects.create(name="legacy", base_url=openai_server.base_url,
                                            api_key_env="DJANGO_SECRET_KEY")
    model = LLMModel.objects.create(name="gpt-legacy", provider=provider, upstream_model="x")

    tested = superuser_client.post(f"{MODELS}/{model.pk}/test", format="json").json()

    assert tested["ok"] is False and "must start with LANGHOST_PROVIDER_" in tested["error"]
    assert not any("the-host-secret-9c1" in str(call.headers)
                   for call in openai_server.calls())


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_providers_own_models_are_listed_then_imported_priced_and_sized(
        superuser_client, make_model, kind, request):
    server = request.getfixturevalue(f"{kind}_server")
    server.models = [("gpt-4o-mini", None), ("text-embedding-3-small", None),
                     ("house-model", 64_000)]
    provider = make_model(server, "already-here", upstream_model="house-model").provider
    url = f"/api/v1/model-providers/{provider.pk}"

    listed = superuser_client.get(f"{url}/upstream-models").json()["data"]
    imported = superuser_client.post(f"{url}/import-models", {}, format="json")

    assert [(m["id"], m["imported"]) for m in listed] == [
        ("gpt-4o-mini", False), ("text-embedding-3-small", False), ("house-model", True)]
    assert imported.status_code == 201
    assert imported.json() == {"created": ["gpt-4o-mini", "text-embedding-3-small"],
                               "skipped": ["house-model"]}
    mini = LLMModel.objects.get(name="gpt-4o-mini")
    assert (mini.context_window, float(mini.input_price_per_mtok)) == (128_000, 0.15)
    assert LLMModel.objects.get(name="text-embedding-3-small").model_type == "embedding"
    again = superuser_client.post(f"{url}/import-models", {"ids": ["gpt-4o-mini"]},
                                  format="json").json()
    assert again == {"created": [], "skipped": ["gpt-4o-mini"]}


def test_a_provider_that_cannot_list_its_models_is_a_502_in_its_words(
        superuser_client, user_client, make_model, openai_server):
    provider = make_model(openai_server, "gpt-fake").provider
    provider.base_url = "http://127.0.0.1:9/v1"  # nothing listens there
    provider.save()

    refused = superuser_client.get(f"/api/v1/model-providers/{provider.pk}/upstream-models")

    assert refused.status_code == 502
    assert "did not list its models: connection error" in refused.json()["detail"]
    assert user_client.get(
        f"/api/v1/model-providers/{provider.pk}/upstream-models").status_code == 403
