"""Tools that run only once the user approves: the built-in LLM agent asks through an
interaction when the model calls one its type marks, the call runs after an approval and
never after a refusal, which the model reads and answers on."""

import json
import sys
import time

import pytest
from django.test import Client

from ledger.models import AgentRun, AgentRunEvent, Conversation, Interaction
from runners.models import LLM_AGENT_RUNNER_ID, McpServer
from runners.tests.conversation_fixtures import conversations_url, read_body
from runners.tests.tools.conftest import SERVER, close_process_sessions  # noqa: F401
from tests.fake_providers import Reply
from tests.timing import scaled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

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


def test_the_conversation_page_shows_the_question_and_its_owner_answers_it_there(
        superuser, superuser_client, make_agent_type, make_agent, make_project, make_model,
        openai_server):
    McpServer.objects.create(name="calc", command=sys.executable, args=[str(SERVER)])
    make_model(openai_server, "gpt-careful")
    agent_type = make_agent_type(name="Careful", runner_id=LLM_AGENT_RUNNER_ID,
                                 primary_model="gpt-careful", mcp_servers=["calc"],
                                 tools_requiring_approval=["add"])
    agent = make_agent(make_project(superuser), agent_type)
    openai_server.script(ADD, Reply(text="2 + 3 is 5."))
    base = conversations_url(agent)
    conversation = superuser_client.post(base, {}, format="json").json()["id"]
    post(superuser_client, f"{base}/{conversation}/messages", {"text": "What is 2 + 3?"})
    page_client = Client()
    page_client.force_login(superuser)
    row = Conversation.objects.get(client_id=conversation)
    page = f"/admin/ledger/conversation/{row.pk}/change/"

    html = page_client.get(page).content.decode()
    assert "Allow the agent to run add?" in html and 'value="approve"' in html
    question = Interaction.objects.get()
    answered = page_client.post(
        f"/admin/conversations/{row.pk}/interactions/{question.pk}/answer/",
        {"action_id": "approve"})

    assert answered.status_code == 302
    for _ in range(int(scaled(200))):
        question.refresh_from_db()
        if question.resume_run_id and AgentRun.objects.filter(
                run_id=question.resume_run_id, status="completed").exists():
            break
        time.sleep(0.05)
    else:
        pytest.fail("the answer's run did not complete")
    assert tool_calls_of(question.resume_run_id)[0]["result"]["text"] == "5"
    assert 'value="approve"' not in page_client.get(page).content.decode()  # answered
