"""`POST /runs` with a typed platform event, for runners whose manifest declares event usage."""

import json

import pytest
from asgiref.sync import sync_to_async

from ledger.services import conversations
from runners.conversations import services as door
from runners.conversations.callers import Caller
from runners.conversations.input import Part
from runners.models import RunnerDescriptor
from runners.tests.conversation_fixtures import (  # noqa: F401
    read_body,
    register_builtin,
    reply_results,
)
from tests.timing import scaled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

JOINED = {"type": "group.member_joined", "data": {"member": "ada", "group": "g-1"}}


async def greet(context):
    event = context["event"]
    for item in reply_results(context, f"{event['event_type']} {json.dumps(event['data'])}"):
        yield item


def event_runner_for(builtin, runner_id: str, patterns: list[str]) -> str:
    runner_id = builtin(runner_id, greet)
    RunnerDescriptor.objects.filter(pk=runner_id).update(usages=["event"],
                                                         supported_event_patterns=patterns)
    return runner_id


@pytest.fixture
def event_runner(builtin):
    return event_runner_for(builtin, "builtin:greeter", ["group.*"])


def start(client, payload):
    response = client.post("/api/v1/runs", payload, format="json")
    return response, json.loads(read_body(response))


def test_an_event_runner_receives_the_typed_event(superuser_client, event_runner):
    response, outcome = start(superuser_client, {"runner_id": event_runner, "event": JOINED})

    assert response.status_code == 201
    reply = outcome["messages"][0]["data"]["message"]["content"]
    assert reply.startswith("group.member_joined ")
    assert json.loads(reply.split(" ", 1)[1])["member"] == "ada"


def test_an_event_runner_not_declared_for_messages_takes_none(superuser_client,
                                                              event_runner):
    response, body = start(superuser_client, {"runner_id": event_runner,
                                              "input": {"text": "hi"}})

    assert response.status_code == 422
    assert "input" in body["errors"]


def test_an_event_the_runner_did_not_declare_is_refused_naming_it(superuser_client,
                                                                  event_runner):
    response, body = start(superuser_client, {"runner_id": event_runner, "event": {
        "type": "friend.request_received", "data": {}}})

    assert response.status_code == 422
    assert "friend.request_received" in body["errors"]["event"][0]


def test_a_message_event_over_rest_carries_its_chains_text(superuser_client, builtin):
    runner_id = event_runner_for(builtin, "builtin:listener", ["message.*"])

    response, outcome = start(superuser_client, {"runner_id": runner_id, "event": {
        "type": "message.received",
        "data": {"message_chain": [{"type": "Plain", "text": "/demo echo hi"}]}}})

    assert response.status_code == 201, outcome
    reply = outcome["messages"][0]["data"]["message"]["content"]
    event = json.loads(reply.split(" ", 1)[1])
    assert event["type"] == "message.received" and event["message_chain"][0]["text"] == \
        "/demo echo hi"


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


# --- LangBot's event runners, in the real runtime ---------------------------------------------

COMMUNITY = "plugin:e2e/agent-runner-qa/community"


def replies(outcome: dict) -> list[str]:
    return [m["data"]["message"]["content"] for m in outcome["messages"]
            if m["type"] == "message.completed"]


@pytest.fixture
async def community(own_gateway):
    gateway = await own_gateway("e2e__agent-runner-qa")
    await gateway.discover(scaled(20))
    return gateway


async def test_a_message_event_reaches_an_event_runners_message_handler(community, superuser):
    prepared = await door.prepare_runner_run(
        Caller(superuser), runner_id=COMMUNITY, event_type="message.received",
        event_data={"message_chain": [{"type": "Plain", "text": "/demo echo hi"}],
                    "sender": {"id": "u1", "nickname": "Alice"}})

    outcome = await door.run_to_end(prepared)

    assert outcome["status"] == "completed", outcome
    assert replies(outcome) == ["Alice: hi"]


async def test_a_platform_event_needs_no_type_repeated_in_its_data(community, superuser):
    prepared = await door.prepare_runner_run(
        Caller(superuser), runner_id=COMMUNITY, event_type="group.member_joined",
        event_data={"member": {"id": "u2", "nickname": "Grace"}, "group": {"id": "g-1"}})

    outcome = await door.run_to_end(prepared)

    assert replies(outcome) == ["welcome Grace to g-1"]


async def test_a_chat_message_to_an_event_runners_agent_arrives_as_a_message_event(
        community, user, make_agent, make_agent_type, project):
    agent = await sync_to_async(make_agent)(
        project, await sync_to_async(make_agent_type)(runner_id=COMMUNITY), name="Demo")
    conversation = await sync_to_async(conversations.create)(
        project_id=str(project.pk), agent_id=str(agent.pk), user_id=str(user.pk))

    prepared = await sync_to_async(door.prepare_agent_run)(
        Caller(user), agent_id=agent.pk, conversation_id=conversation.client_id,
        parts=[Part(text="/demo echo hi")])
    outcome = await door.run_to_end(prepared)

    assert replies(outcome) == ["Alice Liddell: hi"]  # the sender is the user, by name
