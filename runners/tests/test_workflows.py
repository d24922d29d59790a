"""A sequential workflow agent (ADK's `SequentialAgent`): its sub-agents run one after another,
each a run of its own whose parent is the workflow's run; a step's reply is the next step's
message, a step's `output_key` keeps its reply for the later steps' personas (`{key}`), the
last reply is the workflow's and its tokens are the sum of its steps'. A step that fails
fails the workflow, naming it. Scripted model server on 127.0.0.1."""

import pytest
from asgiref.sync import sync_to_async

from ledger.models import AgentRun
from ledger.selectors import runs as readers
from runners.catalogue import services
from runners.conversations.input import Part
from runners.models import LLM_AGENT_RUNNER_ID, WORKFLOW_RUNNER_ID, AgentInstance, AgentType
from runners.tests.conversation_fixtures import through_the_door
from runners.tests.providers.conftest import make_model  # noqa: F401 (a fixture)
from tests.fake_providers import Reply, openai_server  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db(transaction=True)


@sync_to_async
def workflow_of(project, *steps: dict) -> AgentInstance:
    """A sequential type whose sub-agents are built-in agents with these fields, in order."""
    children = [AgentType.objects.create(slug=f"step-{n}", runner_id=LLM_AGENT_RUNNER_ID,
                                         primary_model="scripted", **fields)
                for n, fields in enumerate(steps)]
    workflow = services.save_agent_type(None, services.prepare_agent_type(
        None, {"name": "Writers' room", "slug": "writers-room", "kind": "sequential"},
        [child.pk for child in children]), [child.pk for child in children])
    return AgentInstance.objects.create(name="Room", project=project, agent_type=workflow)


@pytest.fixture
def scripted(make_model, openai_server):  # noqa: F811 (fixtures)
    make_model(openai_server, "scripted")
    return openai_server


async def test_steps_run_in_order_each_reading_the_ones_before(user, user_client, project,
                                                               scripted):
    agent = await workflow_of(
        project,
        {"name": "Drafter", "personality_prompt": "Draft an answer.", "output_key": "draft"},
        {"name": "Editor", "personality_prompt": "Polish this draft: {draft}"},
        {"name": "Closer", "personality_prompt": "Answer in one line."})
    scripted.script(Reply(text="Draft: tides at seven.", input_tokens=10, output_tokens=4),
                    Reply(text="Tides at 7:00.", input_tokens=20, output_tokens=3),
                    Reply(text="7:00.", input_tokens=30, output_tokens=2))

    outcome, _ = await through_the_door(user, agent, [Part(text="When is high tide?")])

    assert outcome["status"] == "completed", outcome
    assert agent.agent_type.runner_id == WORKFLOW_RUNNER_ID
    first, second, third = (call.body["messages"] for call in scripted.calls())
    assert first[-1] == {"role": "user", "content": "When is high tide?"}
    assert "Polish this draft: Draft: tides at seven." in second[0]["content"]
    assert second[-1] == {"role": "user", "content": "Draft: tides at seven."}
    assert third[-1] == {"role": "user", "content": "Tides at 7:00."}
    (reply,) = [message["data"]["message"]["content"] for message in outcome["messages"]
                if message["type"] == "message.completed"]
    assert reply == "7:00."
    steps = [run async for run in AgentRun.objects.filter(
        parent_run_id=outcome["run_id"]).order_by("created_at", "id")]
    assert [run.metadata_json["agent_name"] for run in steps] == ["Drafter", "Editor", "Closer"]
    assert {run.status for run in steps} == {"completed"}
    parent = await AgentRun.objects.aget(run_id=outcome["run_id"])
    assert parent.usage_json["total_tokens"] == sum(run.usage_json["total_tokens"]
                                                    for run in steps) == 69
    listed = await sync_to_async(user_client.get)(
        f"/api/v1/runs?parent_run_id={outcome['run_id']}")
    assert [run["run_id"] for run in listed.json()["data"]] == \
        [run.run_id for run in reversed(steps)]  # newest first
    assert {run["parent_run_id"] for run in listed.json()["data"]} == {outcome["run_id"]}
    kept = [event for event in await readers.run_events(outcome["run_id"])
            if event["type"] == "state.updated"]
    assert [(event["data"]["key"], event["data"]["value"]) for event in kept] == [
        ("draft", "Draft: tides at seven.")]


async def test_a_step_that_fails_fails_the_workflow_naming_it(user, project, scripted):
    agent = await workflow_of(project, {"name": "Drafter"}, {"name": "Editor"})
    scripted.script(Reply(text="A draft."), Reply(status=500, error="the model fell over"))

    outcome, _ = await through_the_door(user, agent, [Part(text="Write.")])

    assert outcome["status"] == "failed"
    assert "step 2 (Editor" in outcome["status_reason"]
    steps = [run.status async for run in AgentRun.objects.filter(
        parent_run_id=outcome["run_id"]).order_by("created_at", "id")]
    assert steps == ["completed", "failed"]
