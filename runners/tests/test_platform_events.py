"""`POST /runs` with a typed platform event, for runners whose manifest declares event usage."""

import json

import pytest

from runners.models import RunnerDescriptor
from runners.tests.conversation_fixtures import (  # noqa: F401
    read_body,
    register_builtin,
    reply_results,
)

pytestmark = pytest.mark.django_db(transaction=True)

JOINED = {"type": "group.member_joined", "data": {"member": "ada", "group": "g-1"}}


@pytest.fixture
def event_runner(builtin):
    async def greet(context):
        event = context["event"]
        for item in reply_results(context, f"{event['event_type']} {json.dumps(event['data'])}"):
            yield item

    runner_id = builtin("builtin:greeter", greet)
    RunnerDescriptor.objects.filter(pk=runner_id).update(usages=["event"])
    return runner_id


def start(client, payload):
    response = client.post("/api/v1/runs", payload, format="json")
    return response, json.loads(read_body(response))


def test_an_event_runner_receives_the_typed_event(superuser_client, event_runner):
    response, outcome = start(superuser_client, {"runner_id": event_runner, "event": JOINED})

    assert response.status_code == 201
    reply = outcome["messages"][0]["data"]["message"]["content"]
    assert reply.startswith("group.member_joined ")
    assert json.loads(reply.split(" ", 1)[1])["member"] == "ada"


def test_an_event_runner_takes_no_message(superuser_client, event_runner):
    response, body = start(superuser_client, {"runner_id": event_runner,
                                              "input": {"text": "hi"}})

    assert response.status_code == 422
    assert "input" in body["errors"]


def test_a_chat_runner_takes_no_event(superuser_client):
    response, body = start(superuser_client, {"runner_id": "builtin:echo", "event": JOINED})

    assert response.status_code == 422
    assert "event" in body["errors"]


def test_a_run_needs_a_message_or_an_event(superuser_client):
    response, body = start(superuser_client, {"runner_id": "builtin:echo"})

    assert response.status_code == 400
    assert "input" in body["errors"]


def test_the_playground_does_not_offer_event_only_runners(admin_client, event_runner):
    html = admin_client.get("/admin/playground/").content.decode()

    assert "builtin:echo" in html
    assert event_runner not in html
