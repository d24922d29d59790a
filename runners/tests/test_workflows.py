"""A sequential workflow agent (ADK's `SequentialAgent`): its sub-agents run one after another,
each a run of its own whose parent is the workflow's run; a step's reply is the next step's
message, a step's `output_key` keeps its reply for the later steps' personas (`{key}`), the
last reply is the workflow's and its tokens are the sum of its steps'. A step that fails
fails the workflow, naming it. Scripted model server on 127.0.0.1."""

import asyncio
import html
import re

import pytest
from asgiref.sync import sync_to_async

from ledger.models import AgentRun
from ledger.selectors import runs as readers
from runners.catalogue import services
from runners.conversations.input import Part
from runners.models import LLM_AGENT_RUNNER_ID, WORKFLOW_RUNNER_ID, AgentInstance, AgentType
from runners.runtime.host_process import host_process
from runners.tests.conversation_fixtures import through_the_door
from runners.tests.providers.conftest import make_model  # noqa: F401 (a fixture)
from tests.fake_providers import Reply, openai_server  # noqa: F401 (a fixture)
from tests.timing import scaled

pytestmark = pytest.mark.django_db(transaction=True)


def workflow_of_sync(project, *steps: dict) -> AgentInstance:
    """A sequential type whose sub-agents are built-in agents with these fields, in order."""
    children = [AgentType.objects.create(slug=f"step-{n}", runner_id=LLM_AGENT_RUNNER_ID,
                                         primary_model="scripted", **fields)
                for n, fields in enumerate(steps)]
    workflow = services.save_agent_type(None, services.prepare_agent_type(
        None, {"name": "Writers' room", "slug": "writers-room", "kind": "sequential"},
        [child.pk for child in children]), [child.pk for child in children])
    return AgentInstance.objects.create(name="Room", project=project, agent_type=workflow)


workflow_of = sync_to_async(workflow_of_sync)


def test_the_admin_draws_a_workflow_and_its_steps(project, admin_browser):
    agent = workflow_of_sync(project, {"name": "Drafter"}, {"name": "Editor"})

    page = admin_browser.get(f"/admin/runners/agenttype/{agent.agent_type_id}/change/")

    assert page.status_code == 200
    assert "steps in order →" in page.content.decode()
    assert [html.unescape(name) for name in re.findall(
        r'data-agent="([^"]+)"', page.content.decode())] == ["Writers' room", "Drafter", "Editor"]


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
    detail = await sync_to_async(user_client.get)(f"/api/v1/runs/{outcome['run_id']}")
    assert detail.json()["steps"] == [run.run_id for run in steps]
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


def by_persona(replies: dict[str, str], pace: float = 0.0) -> Reply:
    """A reply chosen by the step asking (a word of its persona), for steps asking at once."""
    def answer(body: dict) -> Reply:
        system = body["messages"][0]["content"]
        return Reply(text=next(text for word, text in replies.items() if word in system),
                     pace=pace)
    return Reply(answer=answer)


async def test_parallel_steps_run_at_once_and_the_reply_gathers_theirs_in_order(
        user, project, scripted):
    agent = await workflow_of(project, {"name": "North", "personality_prompt": "Watch north."},
                              {"name": "South", "personality_prompt": "Watch south."})
    await AgentType.objects.filter(pk=agent.agent_type_id).aupdate(kind="parallel")
    answers = {"north": "Calm in the north.", "south": "Storm in the south."}
    scripted.script(by_persona(answers, pace=0.1), by_persona(answers, pace=0.1))

    outcome, _ = await through_the_door(user, agent, [Part(text="Report.")])

    assert outcome["status"] == "completed", outcome
    (reply,) = [message["data"]["message"]["content"] for message in outcome["messages"]
                if message["type"] == "message.completed"]
    assert reply == "North: Calm in the north.\n\nSouth: Storm in the south."
    # Each step read the workflow's message, not the other's reply.
    assert [call.body["messages"][-1]["content"] for call in scripted.calls()] == \
        ["Report.", "Report."]
    north, south = [run async for run in AgentRun.objects.filter(
        parent_run_id=outcome["run_id"]).order_by("metadata_json__agent_name")]
    assert north.started_at < south.finished_at and south.started_at < north.finished_at


EXIT = Reply(text="Good enough.", tool_calls=[{"id": "exit-1", "name": "exit_loop",
                                               "arguments": "{}"}])


async def test_a_loop_runs_until_a_step_exits_it_or_its_iterations_run_out(
        user, project, scripted):
    agent = await workflow_of(project, {"name": "Writer"}, {"name": "Critic"})
    await AgentType.objects.filter(pk=agent.agent_type_id).aupdate(kind="loop")
    scripted.script(Reply(text="v1"), Reply(text="Again."), Reply(text="v2"),
                    Reply(text="Again."), Reply(text="v3"), EXIT)

    exited, _ = await through_the_door(user, agent, [Part(text="Write a line.")])

    assert exited["status"] == "completed", exited
    steps = [run.metadata_json["agent_name"] async for run in AgentRun.objects.filter(
        parent_run_id=exited["run_id"]).order_by("created_at", "id")]
    assert steps == ["Writer", "Critic"] * 3
    offered = {tool["function"]["name"] for tool in scripted.calls()[1].body["tools"]}
    assert "exit_loop" in offered
    (reply,) = [message["data"]["message"]["content"] for message in exited["messages"]
                if message["type"] == "message.completed"]
    assert reply == "Good enough."

    await AgentType.objects.filter(pk=agent.agent_type_id).aupdate(max_iterations=2)
    scripted.script(*[Reply(text="again") for _ in range(4)])
    bounded, _ = await through_the_door(user, agent, [Part(text="Write a line.")])
    assert await AgentRun.objects.filter(parent_run_id=bounded["run_id"]).acount() == 4


async def test_cancelling_a_workflow_cancels_the_step_under_way(user, project, scripted):
    agent = await workflow_of(project, {"name": "Slow"}, {"name": "Never"})
    scripted.script(Reply(stall=True))
    answering = asyncio.ensure_future(through_the_door(user, agent, [Part(text="Think.")]))
    step = None
    for _ in range(int(scaled(200))):
        step = await AgentRun.objects.exclude(parent_run_id="").filter(status="running").afirst()
        if step is not None:
            break
        await asyncio.sleep(0.05)
    assert step is not None, "the first step never started"

    await host_process().cancel(step.parent_run_id, "stop the workflow")
    outcome, _ = await answering

    assert outcome["status"] == "cancelled"
    steps = [(run.metadata_json["agent_name"], run.status) async for run in
             AgentRun.objects.filter(parent_run_id=step.parent_run_id)]
    assert steps == [("Slow", "cancelled")]


async def test_an_agent_called_as_a_tool_twice_answers_in_two_child_runs(
        user, project, scripted):
    @sync_to_async
    def caller_with_a_tool():
        expert = AgentType.objects.create(name="Tide expert", slug="tide-expert",
                                          runner_id=LLM_AGENT_RUNNER_ID,
                                          primary_model="scripted",
                                          description="Knows the tides.")
        retired = AgentType.objects.create(name="Retired", slug="retired", is_active=False,
                                           runner_id=LLM_AGENT_RUNNER_ID,
                                           primary_model="scripted")
        caller = AgentType.objects.create(name="Guide", slug="guide",
                                          runner_id=LLM_AGENT_RUNNER_ID,
                                          primary_model="scripted",
                                          agent_tools=[str(expert.pk), str(retired.pk)])
        return AgentInstance.objects.create(name="Guide", project=project, agent_type=caller)

    agent = await caller_with_a_tool()
    ask = [{"id": f"ask-{n}", "name": "ask_tide_expert",
            "arguments": f'{{"request": "high tide on day {n}?"}}'} for n in (1, 2)]
    scripted.script(Reply(text="", tool_calls=ask), Reply(text="At 7:00."),
                    Reply(text="At 7:50."), Reply(text="7:00, then 7:50."))

    outcome, _ = await through_the_door(user, agent, [Part(text="Tides this week?")])

    assert outcome["status"] == "completed", outcome
    offered = {tool["function"]["name"] for tool in scripted.calls()[0].body["tools"]}
    assert "ask_tide_expert" in offered and "ask_retired" not in offered
    children = [run async for run in AgentRun.objects.filter(
        parent_run_id=outcome["run_id"]).order_by("created_at", "id")]
    assert [run.metadata_json["agent_name"] for run in children] == ["Tide expert"] * 2
    assert [call.body["messages"][-1]["content"] for call in scripted.calls()[1:3]] == [
        "high tide on day 1?", "high tide on day 2?"]
    tool_answers = [m["content"] for m in scripted.calls()[3].body["messages"]
                    if m["role"] == "tool"]
    assert tool_answers == ["At 7:00.", "At 7:50."]


async def test_a_workflow_without_steps_fails_saying_so_and_one_no_longer_a_workflow_answers(
        user, project, scripted):
    agent = await workflow_of(project)

    empty, _ = await through_the_door(user, agent, [Part(text="Anyone?")])

    assert (empty["status"], empty["status_reason"].split(":")[0]) == (
        "failed", "workflow.no_steps")

    @sync_to_async
    def made_an_echo_again():
        agent_type = AgentType.objects.get(pk=agent.agent_type_id)
        return services.save_agent_type(agent_type, services.prepare_agent_type(
            agent_type, {"kind": "llm"}))

    assert (await made_an_echo_again()).runner_id == "builtin:echo"


async def test_a_parallel_step_that_cannot_start_fails_the_workflow_unless_it_goes_on(
        user, project, scripted):
    agent = await workflow_of(project, {"name": "Works"}, {"name": "Gone"})
    await AgentType.objects.filter(name="Gone").aupdate(runner_id="builtin:gone")
    await AgentType.objects.filter(pk=agent.agent_type_id).aupdate(kind="parallel")
    scripted.script(Reply(text="Done."), Reply(text="Done again."))

    failed, _ = await through_the_door(user, agent, [Part(text="Go.")])
    await AgentType.objects.filter(pk=agent.agent_type_id).aupdate(
        continue_on_step_failure=True)
    went_on, _ = await through_the_door(user, agent, [Part(text="Go.")])

    assert failed["status"] == "failed" and "step 2 (Gone" in failed["status_reason"]
    assert went_on["status"] == "completed"
    assert [message["data"]["message"]["content"] for message in went_on["messages"]
            if message["type"] == "message.completed"] == ["Works: Done again."]
