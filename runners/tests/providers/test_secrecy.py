"""A provider's API key reaches the provider and nothing else: no API response, admin page,
log line or ledger row shows it, even when the provider echoes it in an error."""

import logging
from contextlib import aclosing

import pytest
from asgiref.sync import async_to_sync

from ledger.models import ModelCall
from runners.models import LLMModel
from runners.providers.calls import CallInfo, stream
from runners.providers.fallback import with_fallback
from runners.tests.providers.conftest import API_KEY
from tests.fake_providers import Reply

pytestmark = pytest.mark.django_db


@async_to_sync
async def stream_once(model):
    async with aclosing(stream(model, [{"role": "user", "content": "hi"}],
                               call=CallInfo(run_id="run-s"))) as events:
        return [event async for event in events]


@async_to_sync
async def fallback_once(models):
    return await with_fallback(models, [{"role": "user", "content": "hi"}],
                               call=CallInfo(run_id="run-f"))


def test_the_api_key_shows_up_nowhere_but_at_the_provider(
        superuser_client, admin_browser, openai_server, anthropic_server, caplog):
    caplog.set_level(logging.DEBUG)  # the SDKs' and HTTP clients' debug logs too
    seen = []
    provider = superuser_client.post("/api/v1/model-providers", {
        "name": "openai", "kind": "openai", "base_url": openai_server.base_url,
        "api_key": API_KEY}, format="json")
    other = superuser_client.post("/api/v1/model-providers", {
        "name": "anthropic", "kind": "anthropic", "base_url": anthropic_server.base_url,
        "api_key": API_KEY}, format="json")
    seen += [provider, other]
    model = superuser_client.post("/api/v1/models", {
        "name": "gpt", "provider_id": provider.json()["id"], "upstream_model": "gpt-4o"},
        format="json")
    backup = superuser_client.post("/api/v1/models", {
        "name": "claude", "provider_id": other.json()["id"], "upstream_model": "claude-x"},
        format="json")
    seen += [model, backup]
    url = f"/api/v1/models/{model.json()['id']}/test"

    seen.append(superuser_client.post(url))
    openai_server.script(Reply(status=401, error=f"Incorrect API key provided: {API_KEY}"))
    echoed = superuser_client.post(url)
    seen.append(echoed)
    models = list(LLMModel.objects.select_related("provider").order_by("-name"))
    openai_server.script(Reply(status=500, error=f"key {API_KEY} is over quota"))
    fallback_once(models)
    stream_once(models[0])
    seen += [superuser_client.get(path) for path in (
        "/api/v1/model-providers", f"/api/v1/model-providers/{provider.json()['id']}",
        "/api/v1/models", f"/api/v1/models/{model.json()['id']}")]
    pages = [admin_browser.get(path) for path in (
        "/admin/runners/modelprovider/", f"/admin/runners/modelprovider/{provider.json()['id']}/change/",
        "/admin/runners/llmmodel/", f"/admin/runners/llmmodel/{model.json()['id']}/change/")]

    assert openai_server.requests[0].headers["authorization"] == f"Bearer {API_KEY}"
    assert echoed.json() == {"ok": False, "error": "HTTP 401: Incorrect API key provided: ***"}
    for response in seen + pages:
        assert response.status_code in (200, 201), response.content
        assert API_KEY not in response.content.decode()
    assert API_KEY not in caplog.text
    rows = list(ModelCall.objects.values())
    assert len(rows) == 5
    assert all(API_KEY not in str(value) for row in rows for value in row.values())
    assert "HTTP 500: key *** is over quota" in {row["error"] for row in rows}
