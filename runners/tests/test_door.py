"""The one door: every way into a run decides who may do what the same way.

Two users, Alice (`user`) and Bob (`member`, a member of Alice's project who is not the owner of
her conversations), and Mallory (`outsider`) with a project and agent of her own.
"""

import json

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.core.management import CommandError, call_command

from accounts.tokens import token_pair
from langhost.asgi import application
from ledger.models import AgentRun, AgentRunnerState, Conversation, EventLog, Transcript
from runners.models import AgentInstance, Binding
from runners.tests.conversation_fixtures import (  # noqa: F401
    conversations_url,
    read_body,
    register_builtin,
    reply_results,
)
from tests.timing import scaled

pytestmark = pytest.mark.django_db(transaction=True)


def open_conversation(client, agent, **body) -> str:
    response = client.post(conversations_url(agent), body, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def start_run(client, payload):
    response = client.post("/api/v1/runs", payload, format="json")
    body = read_body(response)
    return response, json.loads(body) if body else None


def send(client, agent, conversation_id, text="hi"):
    response = client.post(f"{conversations_url(agent)}/{conversation_id}/messages",
                           {"text": text}, format="json")
    return response, json.loads(read_body(response))


def footprint():
    return (AgentRun.objects.count(), Transcript.objects.count(), EventLog.objects.count(),
            AgentRunnerState.objects.count())


# --- idempotency keys belong to their caller ------------------------------------------------

@pytest.fixture
def mallorys_agent(make_project, make_agent, agent_type, outsider):
    return make_agent(make_project(outsider), agent_type)


def test_reusing_someone_elses_event_id_starts_your_own_run(
        user_client, outsider_client, agent, mallorys_agent):
    _, alices = start_run(user_client, {"agent_id": str(agent.pk), "event_id": "order-1001",
                                        "input": {"text": "alice's secret"}})

    response, mallorys = start_run(outsider_client, {
        "agent_id": str(mallorys_agent.pk), "event_id": "order-1001", "input": {"text": "mine"}})

    assert response.status_code == 201
    assert mallorys["run_id"] != alices["run_id"]
    assert mallorys["event_id"] == "order-1001"
    assert "alice's secret" not in json.dumps(mallorys)
    assert mallorys["messages"][0]["data"]["message"]["content"] == "echo: mine"
    # The ledger keeps each caller's id as they sent it (seed 000 looks runs up by it).
    assert AgentRun.objects.filter(event_id="order-1001").count() == 2


def test_a_key_someone_else_used_first_does_not_stop_your_run(
        user_client, outsider_client, agent, mallorys_agent):
    start_run(outsider_client, {"agent_id": str(mallorys_agent.pk), "event_id": "k-1",
                                "input": {"text": "first"}})

    response, alices = start_run(user_client, {"agent_id": str(agent.pk), "event_id": "k-1",
                                               "input": {"text": "second"}})

    assert response.status_code == 201
    assert alices["messages"][0]["data"]["message"]["content"] == "echo: second"
    assert AgentRun.objects.get(run_id=alices["run_id"]).actor_id == str(agent.project.owner_id)


def test_your_own_repeated_key_replays_your_run(user_client, agent):
    started, first = start_run(user_client, {"agent_id": str(agent.pk), "event_id": "again",
                                             "input": {"text": "one"}})
    replayed, second = start_run(user_client, {"agent_id": str(agent.pk), "event_id": "again",
                                               "input": {"text": "two"}})

    assert (started.status_code, replayed.status_code) == (201, 200)
    assert second["run_id"] == first["run_id"]
    assert AgentRun.objects.count() == 1


# --- conversations belong to their owner ---------------------------------------------------

def test_a_conversation_id_someone_else_has_is_free_for_you(user_client, member_client, agent):
    open_conversation(user_client, agent, conversation_id="chat-1")

    assert open_conversation(member_client, agent, conversation_id="chat-1") == "chat-1"


def test_a_member_cannot_run_in_someone_elses_conversation(user_client, member_client, agent):
    conversation = open_conversation(user_client, agent, conversation_id="alices")
    before = footprint()

    by_runs, _ = start_run(member_client, {"agent_id": str(agent.pk), "conversation_id": conversation,
                                        "input": {"text": "let me in"}})
    by_messages, _ = send(member_client, agent, conversation, "let me in")

    assert (by_runs.status_code, by_messages.status_code) == (404, 404)
    assert footprint() == before


@pytest.mark.processes  # langhost.asgi.application starts this process's runtime
async def test_a_member_cannot_open_someone_elses_conversation_socket(
        user_client, member, agent):
    conversation = await sync_to_async(open_conversation)(user_client, agent,
                                                          conversation_id="alices")
    token = await sync_to_async(lambda: token_pair(member)["access_token"])()
    socket = WebsocketCommunicator(application, f"/ws/conversations/{conversation}/?token={token}")
    await socket.connect(timeout=scaled(1))

    assert (await socket.receive_output(timeout=scaled(5)))["code"] == 4404
    assert await sync_to_async(footprint)() == (0, 0, 0, 0)


# --- runs are seen by their actor, the project's owner and superusers ----------------------

def test_a_member_sees_only_their_own_runs(user_client, member_client, agent, member):
    _, alices = start_run(user_client, {"agent_id": str(agent.pk), "input": {"text": "a"}})
    _, bobs = start_run(member_client, {"agent_id": str(agent.pk), "input": {"text": "b"}})

    listed = [run["run_id"] for run in member_client.get("/api/v1/runs").json()["data"]]
    owner_listed = [run["run_id"] for run in user_client.get("/api/v1/runs").json()["data"]]

    assert listed == [bobs["run_id"]]
    assert set(owner_listed) == {alices["run_id"], bobs["run_id"]}
    for path in ("", "/events"):
        assert member_client.get(f"/api/v1/runs/{alices['run_id']}{path}").status_code == 404
    assert member_client.post(f"/api/v1/runs/{alices['run_id']}/cancel").status_code == 404


@pytest.mark.processes  # langhost.asgi.application starts this process's runtime
async def test_a_member_cannot_watch_someone_elses_run(user_client, member, agent):
    _, alices = await sync_to_async(start_run)(
        user_client, {"agent_id": str(agent.pk), "input": {"text": "a"}})
    token = await sync_to_async(lambda: token_pair(member)["access_token"])()
    socket = WebsocketCommunicator(application, f"/ws/runs/{alices['run_id']}/?token={token}")
    await socket.connect(timeout=scaled(1))

    assert (await socket.receive_output(timeout=scaled(5)))["code"] == 4403


def test_runtime_status_is_for_superusers_only(user_client):
    assert user_client.get("/api/v1/runners/runtime").status_code == 403


# --- paused and terminated agents, through every door --------------------------------------

@pytest.mark.parametrize(("action", "status"), [("pause", 409), ("terminate", 410)])
def test_a_stopped_agent_is_refused_through_every_door(user_client, agent, action, status):
    conversation = open_conversation(user_client, agent)
    AgentInstance.objects.get(pk=agent.pk).transition(action)
    before = footprint()

    by_runs, _ = start_run(user_client, {"agent_id": str(agent.pk), "input": {"text": "x"}})
    by_messages, _ = send(user_client, agent, conversation)
    with pytest.raises(CommandError, match=action.rstrip("e") + "ed"):
        call_command("run_agent", "--agent", str(agent.pk), "x")

    assert (by_runs.status_code, by_messages.status_code) == (status, status)
    assert footprint() == before


@pytest.mark.processes  # langhost.asgi.application starts this process's runtime
async def test_a_paused_agent_is_refused_over_the_conversation_socket(user_client, user, agent):
    conversation = await sync_to_async(open_conversation)(user_client, agent)
    await sync_to_async(lambda: AgentInstance.objects.get(pk=agent.pk).transition("pause"))()
    token = await sync_to_async(lambda: token_pair(user)["access_token"])()
    socket = WebsocketCommunicator(application, f"/ws/conversations/{conversation}/?token={token}")
    await socket.connect(timeout=scaled(1))
    assert (await socket.receive_json_from(timeout=scaled(5)))["type"] == "ready"

    await socket.send_json_to({"type": "message", "text": "hi"})
    error = await socket.receive_json_from(timeout=scaled(5))
    await socket.disconnect()

    assert (error["type"], error["status"]) == ("error", 409)


# --- bindings: the most specific one answers ------------------------------------------------

@pytest.fixture
def own_runner_agent(builtin, make_agent_type, make_agent, project):
    async def own(context):
        for item in reply_results(context, "from the agent's own runner"):
            yield item

    builtin("builtin:own", own)
    return make_agent(project, make_agent_type(runner_id="builtin:own"))


def reply(client, agent, conversation_id):
    return send(client, agent, conversation_id)[1]["reply"]["content"]


def test_a_conversation_binding_overrides_the_agents_runner_there_only(
        user_client, own_runner_agent):
    agent = own_runner_agent
    bound = open_conversation(user_client, agent, conversation_id="bound")
    other = open_conversation(user_client, agent, conversation_id="other")
    key = Conversation.objects.get(client_id="bound").conversation_id
    Binding.objects.create(binding_id="echo-here", scope_type="conversation", scope_id=key,
                           runner_id="builtin:echo")

    assert reply(user_client, agent, bound) == "echo: hi"
    assert reply(user_client, agent, other) == "from the agent's own runner"


def test_a_project_binding_applies_to_its_agents_until_removed(
        user_client, own_runner_agent, project):
    agent = own_runner_agent
    conversation = open_conversation(user_client, agent)
    binding = Binding.objects.create(binding_id="project-echo", scope_type="project",
                                     scope_id=str(project.pk), runner_id="builtin:echo")

    assert reply(user_client, agent, conversation) == "echo: hi"
    binding.delete()
    assert reply(user_client, agent, conversation) == "from the agent's own runner"


def test_two_bindings_at_one_level_are_refused_naming_both(user_client, own_runner_agent, project):
    conversation = open_conversation(user_client, own_runner_agent)
    for name in ("one", "two"):
        Binding.objects.create(binding_id=name, scope_type="project", scope_id=str(project.pk),
                               runner_id="builtin:echo")

    response, body = send(user_client, own_runner_agent, conversation)

    assert response.status_code == 409
    assert "one" in body["detail"] and "two" in body["detail"]
