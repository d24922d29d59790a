"""Input that once answered 500 answers a JSON 4xx naming what is wrong, and stores nothing."""

import json

import pytest

from ledger.models import AgentRun
from runners.models import RunnerDescriptor
from runners.tests.conversation_fixtures import conversations_url

pytestmark = pytest.mark.django_db

# Deeper than Python parses, and within the body a caller not signed in may send (64 KiB).
DEEP = "[" * 20_000 + "]" * 20_000
LONE_SURROGATE = '{"text": "a\\ud800b"}'


def assert_json_4xx(response, status: int, names: str | None = None) -> dict:
    assert response.status_code == status, (response.status_code, response.content[:300])
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    if names:
        assert names in json.dumps(body), body
    return body


@pytest.mark.processes  # a refresh starts the runtime
@pytest.mark.django_db(transaction=True)  # the runtime's discovery writes from its own thread
def test_runner_refresh_answers_without_a_server_error(superuser_client):
    response = superuser_client.post("/api/v1/runners/refresh")

    assert response.status_code in (200, 503), response.content[:300]
    assert response["Content-Type"].startswith("application/json")


def test_a_project_id_that_is_no_uuid_is_a_404(user_client):
    response = user_client.get(f"/api/v1/projects/{'x' * 36}/agents")

    assert_json_4xx(response, 404)


@pytest.mark.parametrize("url", ["/api/v1/auth/login", "/api/v1/projects", "/api/v1/runs"])
def test_deeply_nested_json_is_a_400(anon_client, user_client, url):
    client = anon_client if "auth" in url else user_client

    response = client.post(url, DEEP, content_type="application/json")

    assert_json_4xx(response, 400, "JSON")


@pytest.mark.parametrize("url", ["/api/v1/auth/login", "/api/v1/auth/register",
                                 "/api/v1/user/auth"])
def test_a_caller_not_signed_in_may_not_send_a_large_body(anon_client, url):
    body = '{"email": "a@example.com", "password": "' + "x" * 70_000 + '"}'

    response = anon_client.post(url, body, content_type="application/json")

    assert response.status_code == 413
    assert "65536 bytes" in response.content.decode()


def test_a_lone_surrogate_in_run_input_is_a_400_naming_it(user_client):
    body = '{"runner_id": "builtin:echo", "input": ' + LONE_SURROGATE + '}'

    response = user_client.post("/api/v1/runs", body, content_type="application/json")

    assert_json_4xx(response, 400, "surrogate")
    assert not AgentRun.objects.exists()


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_a_number_json_has_not_is_a_400_naming_it(user_client, constant):
    body = '{"runner_id": "builtin:echo", "input": {"text": "hi"}, "timeout": ' + constant + '}'

    response = user_client.post("/api/v1/runs", body, content_type="application/json")

    assert_json_4xx(response, 400, constant)
    assert not AgentRun.objects.exists()


def test_a_lone_surrogate_in_conversation_state_is_a_400(user_client, agent):
    conversation = user_client.post(conversations_url(agent), {}, format="json").json()["id"]

    response = user_client.patch(f"{conversations_url(agent)}/{conversation}",
                                 '{"state": {"k": "a\\udfffb"}}',
                                 content_type="application/json")

    assert_json_4xx(response, 400, "surrogate")


def test_an_impossible_after_date_is_a_400_naming_after(user_client, agent):
    conversation = user_client.post(conversations_url(agent), {}, format="json").json()["id"]

    response = user_client.get(f"{conversations_url(agent)}/{conversation}",
                               {"after": "2024-13-45T25:61:00"})

    assert_json_4xx(response, 400, "after")


@pytest.mark.parametrize("field, junk", [
    ("attachments", "nope"), ("attachments", [1, "x"]), ("attachments", [{"name": 3}]),
    ("contents", "nope"), ("contents", [[]]), ("contents", [{"type": 5}]),
])
def test_junk_attachments_or_contents_are_a_400_naming_the_field(user_client, field, junk):
    response = user_client.post("/api/v1/runs", {
        "runner_id": "builtin:echo", "input": {"text": "hi", field: junk}}, format="json")

    assert_json_4xx(response, 400, field)
    assert not AgentRun.objects.exists()


@pytest.mark.parametrize("context", ["a string", 5, [1], {"event": "str"}, {"input": 3},
                                     {"conversation": []}, {"config": "x"}])
def test_debug_action_with_a_context_that_is_no_object_is_a_400(superuser_client, context):
    response = superuser_client.post("/api/v1/system/debug/plugin/action", {
        "action": "run_agent", "data": {"plugin_author": "e2e", "plugin_name": "qa",
                                        "runner_name": "default", "context": context}},
        format="json")

    assert response.status_code == 400, response.content[:300]
    assert response.json()["msg"]


@pytest.mark.parametrize("context", [{"event": {"event_id": "e" * 256}}, {"event": {"event_id": 5}},
                                     {"event": {"event_type": "t" * 129}},
                                     {"conversation": {"conversation_id": ["c"]}}])
def test_debug_action_with_event_ids_the_ledger_cannot_keep_is_a_400(superuser_client, context):
    RunnerDescriptor.objects.create(id="plugin:e2e/qa/default", source="plugin",
                                    plugin_author="e2e", plugin_name="qa", runner_name="default")

    response = superuser_client.post("/api/v1/system/debug/plugin/action", {
        "action": "run_agent", "data": {"plugin_author": "e2e", "plugin_name": "qa",
                                        "runner_name": "default", "context": context}},
        format="json")

    assert response.status_code == 400, response.content[:300]
    assert next(iter(context)) in response.json()["msg"]
    assert not AgentRun.objects.exists()


def test_a_body_over_the_upload_limit_is_a_json_413(user_client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024

    response = user_client.post("/api/v1/projects", {"name": "x" * 4096, "slug": "big"},
                                format="json")

    assert_json_4xx(response, 413, "limit")


def test_a_json_upload_of_several_megabytes_is_accepted(user_client, agent):
    conversation = user_client.post(conversations_url(agent), {}, format="json").json()["id"]

    response = user_client.post(f"{conversations_url(agent)}/{conversation}/artifacts",
                                {"name": "big.txt", "text": "x" * (5 * 1024 * 1024)},
                                format="json")

    assert response.status_code == 201, response.content[:300]


def test_a_json_post_signed_in_by_session_passes_its_csrf_check(user):
    from django.test import Client

    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    browser.get("/api/v1/projects", HTTP_ACCEPT="text/html")  # sets the CSRF cookie
    token = browser.cookies["csrftoken"].value

    response = browser.post("/api/v1/projects", {"name": "By session"},
                            content_type="application/json", HTTP_X_CSRFTOKEN=token)

    assert response.status_code == 201, response.content[:300]
