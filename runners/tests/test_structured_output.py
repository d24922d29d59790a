"""An agent type's output schema: the built-in agent asks its model for JSON of that shape
(OpenAI's JSON-schema response format, and its instructions), checks the reply, asks once
more saying what was wrong, and fails the run `output.invalid` when the second answer is
wrong too; the reply carries the parsed value. Scripted model server on 127.0.0.1."""

import json

import pytest

from runners.conversations.input import Part
from runners.models import LLM_AGENT_RUNNER_ID, AgentInstance, AgentType
from runners.tests.conversation_fixtures import through_the_door
from runners.tests.providers.conftest import make_model  # noqa: F401 (a fixture)
from tests.fake_providers import Reply, openai_server  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db(transaction=True)

WEATHER = {"type": "object", "required": ["city", "temp"], "additionalProperties": False,
           "properties": {"city": {"type": "string"}, "temp": {"type": "integer"}}}


@pytest.fixture
def forecaster(make_model, openai_server, project):  # noqa: F811 (fixtures)
    make_model(openai_server, "scripted", abilities=["json_schema"])
    agent_type = AgentType.objects.create(name="Forecaster", slug="forecaster",
                                          runner_id=LLM_AGENT_RUNNER_ID,
                                          primary_model="scripted", output_schema=WEATHER)
    return AgentInstance.objects.create(name="Forecast", project=project, agent_type=agent_type)


async def test_a_wrong_first_answer_is_asked_again_and_the_right_one_parsed(
        user, forecaster, openai_server):  # noqa: F811 (fixtures)
    openai_server.script(Reply(text="Sunny in Paris."), Reply(
        text='Here it is:\n```JSON\n{"city": "Paris", "temp": 21}\n```\nEnjoy.'))

    outcome, _ = await through_the_door(user, forecaster, [Part(text="Paris?")])

    assert outcome["status"] == "completed", outcome
    (reply,) = [message["data"]["message"] for message in outcome["messages"]
                if message["type"] == "message.completed"]
    assert reply["provider_specific_fields"]["structured_output"] == {"city": "Paris",
                                                                      "temp": 21}
    first, second = (call.body for call in openai_server.calls())
    assert first["response_format"]["json_schema"]["schema"] == WEATHER
    assert json.dumps(WEATHER) in first["messages"][0]["content"]
    assert "not JSON" in second["messages"][-1]["content"]


async def test_a_second_wrong_answer_fails_the_run_saying_what_was_wrong(
        user, forecaster, openai_server):  # noqa: F811 (fixtures)
    openai_server.script(Reply(text='{"city": "Paris"}'),
                         Reply(text='{"city": "Paris", "temp": "warm"}'))

    outcome, _ = await through_the_door(user, forecaster, [Part(text="Paris?")])

    assert outcome["status"] == "failed"
    assert outcome["status_reason"].startswith("output.invalid:")
    assert "temp" in outcome["status_reason"]
    assert "'temp' is a required property" in openai_server.calls()[1].body["messages"][-1][
        "content"]


def test_an_output_schema_that_is_no_schema_is_refused_naming_the_field(superuser_client):
    answer = superuser_client.post("/api/v1/agent-types", {
        "name": "Broken", "slug": "broken", "output_schema": {"type": "nonsense"}},
        format="json")

    assert answer.status_code == 400
    assert "output_schema" in answer.json()["errors"]
