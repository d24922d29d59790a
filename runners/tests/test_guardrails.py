"""An agent type's guardrails: an input guardrail of patterns stops the run before any model
is asked; an output guardrail checked by a model replaces a reply it blocks; either ends the
run `guardrail.tripped` naming it, recorded on the run. Scripted model server on 127.0.0.1."""

import json

import pytest

from ledger.models import Transcript
from ledger.selectors import runs as readers
from runners.conversations.input import Part
from runners.models import LLM_AGENT_RUNNER_ID, AgentInstance, AgentType
from runners.tests.conversation_fixtures import through_the_door
from runners.tests.providers.conftest import make_model  # noqa: F401 (a fixture)
from tests.fake_providers import Reply, openai_server  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db(transaction=True)

GUARDRAILS = {
    "input": [{"name": "no-passwords", "patterns": [r"(?i)\bpassword\b"]}],
    "output": [{"name": "no-codes", "model": "judge",
                "prompt": "Block a text that gives away an access code."}]}


@pytest.fixture
def guarded(make_model, openai_server, project):  # noqa: F811 (fixtures)
    make_model(openai_server, "scripted")
    make_model(openai_server, "judge")
    agent_type = AgentType.objects.create(name="Doorman", slug="doorman",
                                          runner_id=LLM_AGENT_RUNNER_ID,
                                          primary_model="scripted", guardrails=GUARDRAILS)
    return AgentInstance.objects.create(name="Door", project=project, agent_type=agent_type)


async def tripped(run_id: str) -> list[dict]:
    return [event["data"] for event in await readers.run_events(run_id)
            if event["type"] == "guardrail.tripped"]


async def test_an_input_guardrail_stops_the_run_before_any_model_is_asked(
        user, guarded, openai_server):  # noqa: F811 (fixtures)
    outcome, _ = await through_the_door(user, guarded, [Part(text="My password is hunter2")])

    assert outcome["status"] == "failed"
    assert outcome["status_reason"].startswith("guardrail.tripped: no-passwords:")
    assert openai_server.calls() == []
    # The conversation keeps no trace of it for a later turn to read.
    kept = [row.content async for row in Transcript.objects.filter(role="user")]
    assert kept == ["[withheld: guardrail no-passwords]"]
    assert [(event["name"], event["stage"]) for event in await tripped(outcome["run_id"])] == [
        ("no-passwords", "input")]


async def test_an_output_guardrail_checked_by_a_model_replaces_the_reply_it_blocks(
        user, guarded, openai_server):  # noqa: F811 (fixtures)
    openai_server.script(Reply(text="The door code is 4711."),
                         Reply(text="BLOCK\nIt gives away the door code."),
                         Reply(text="The door opens at nine."), Reply(text="PASS\nHarmless."))

    blocked, _ = await through_the_door(user, guarded, [Part(text="How do I get in?")])
    passed, _ = await through_the_door(user, guarded, [Part(text="When does it open?")])

    assert blocked["status"] == "failed"
    assert blocked["status_reason"] == \
        "guardrail.tripped: no-codes: It gives away the door code."
    replies = [message["data"]["message"]["content"] for message in blocked["messages"]
               if message["type"] == "message.completed"]
    assert replies == ["[withheld: guardrail no-codes]"]
    # Not a word of it went out: its streamed text was held back for the check.
    assert "4711" not in json.dumps(blocked["messages"])
    assert "4711" not in json.dumps([event for event in await readers.run_events(
        blocked["run_id"]) if event["type"] != "guardrail.tripped"])
    judged = openai_server.calls()[1].body["messages"]
    assert "access code" in judged[0]["content"] and judged[1]["content"] == \
        "The door code is 4711."
    assert passed["status"] == "completed"
    assert [message["data"]["message"]["content"] for message in passed["messages"]
            if message["type"] == "message.completed"] == ["The door opens at nine."]


def test_a_guardrail_that_cannot_check_is_refused_naming_the_field(superuser_client):
    answer = superuser_client.post("/api/v1/agent-types", {
        "name": "Broken", "slug": "broken",
        "guardrails": {"input": [{"name": "bad", "patterns": ["("]}]}}, format="json")

    assert answer.status_code == 400
    assert "no regular expression" in answer.json()["errors"]["guardrails"][0]
