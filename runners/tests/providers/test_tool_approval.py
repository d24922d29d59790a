"""Tools that run only once the user approves: the built-in LLM agent asks through an
interaction when the model calls one its type marks, the call runs after an approval and
never after a refusal, which the model reads and answers on."""

import json
import sys

import pytest

from ledger.models import AgentRunEvent, Interaction
from runners.models import LLM_AGENT_RUNNER_ID, McpServer
from runners.tests.conversation_fixtures import conversations_url, read_body
from runners.tests.tools.conftest import SERVER, close_process_sessions  # noqa: F401
from tests.fake_providers import Reply

pytestmark = pytest.mark.django_db(transaction=True)

ADD = Reply(text="", tool_calls=[{"id": "call-add", "name": "add",
                                  "arguments": '{"a": 2, "b": 3}'}])


@pytest.fixture
def careful_agent(make_agent_type, make_agent, make_model, project, openai_server):
    McpServer.objects.create(name="calc", command=sys.executable, args=[str(SERVER)])
    make_model(openai_server, "gpt-careful")
    agent_type = make_agent_type(name="Careful", runner_id=LLM_AGENT_RUNNER_ID,
                                 primary_model="gpt-careful", mcp_servers=["calc"],
                                 tools_requiring_approval=["add"])
    return make_agent(project, agent_type)


def post(client, url, body) -> tuple[int, dict]:
    response = client.post(url, body, format="json")
    return response.status_code, json.loads(read_body(response).decode())


def ask_and_answer(client, agent, action_id):
    base = conversations_url(agent)
    conversation = client.post(base, {}, format="json").json()["id"]
    _, asked = post(client, f"{base}/{conversation}/messages", {"text": "What is 2 + 3?"})
    (question,) = client.get(f"{base}/{conversation}/interactions").json()["data"]
    status, answered = post(client, f"{base}/{conversation}/interactions/"
                                    f"{question['interaction_id']}", {"action_id": action_id})
    return asked, question, status, answered


def tool_calls_of(run_id):
    return list(AgentRunEvent.objects.filter(run_id=run_id, type="tool.call.completed")
                .values_list("data_json", flat=True))


def test_a_marked_tool_runs_only_after_the_user_approves(user_client, careful_agent,
                                                         openai_server):
    openai_server.script(ADD, Reply(text="2 + 3 is 5."))

    asked, question, status, answered = ask_and_answer(user_client, careful_agent, "approve")

    assert asked["status"] == "completed" and asked["reply"] is None
    assert tool_calls_of(asked["run_id"]) == []  # not run while waiting
    assert question["kind"] == "confirmation" and "add" in question["title"]
    assert status == 201 and answered["status"] == "completed", answered
    (completed,) = tool_calls_of(answered["run_id"])
    assert completed["result"]["text"] == "5" and completed["error"] is None
    assert answered["reply"]["content"] == "2 + 3 is 5."
    second = openai_server.calls()[-1]
    assert second.body["messages"][-1] == {"role": "tool", "tool_call_id": "call-add",
                                           "content": "5"}
    assert Interaction.objects.get().status == "submitted"


def test_a_refused_tool_never_runs_and_the_model_is_told(user_client, careful_agent,
                                                         openai_server):
    openai_server.script(ADD, Reply(text="Understood, I will not calculate."))

    _, _, status, answered = ask_and_answer(user_client, careful_agent, "refuse")

    assert status == 201 and answered["status"] == "completed"
    (completed,) = tool_calls_of(answered["run_id"])
    assert completed["result"] is None
    assert completed["error"] == "the user refused to run this tool"
    told = openai_server.calls()[-1].body["messages"][-1]
    assert told == {"role": "tool", "tool_call_id": "call-add",
                    "content": "Error: the user refused to run this tool"}
    assert answered["reply"]["content"] == "Understood, I will not calculate."
