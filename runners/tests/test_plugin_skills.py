"""A plugin runner uses skills as the built-in agent does: it is granted `activate_skill`
when its type has skills, an activated skill's instructions come back to it, and the skill
stays active in the conversation (`host.activated_skills`), so its next run finds it there.
Real runtime, fixture runner `e2e/agent-runner-llm/skill-user`."""

import json

import pytest

from ledger.selectors import runs as readers
from runners.conversations.input import Part
from runners.models import AgentInstance, AgentType
from runners.skills.models import Skill
from runners.tests.conversation_fixtures import through_the_door

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

SKILL_USER = "plugin:e2e/agent-runner-llm/skill-user"


async def say(user, agent, text: str, conversation=None):
    outcome, conversation = await through_the_door(user, agent, [Part(text=text)], conversation)
    replies = [json.loads(message["data"]["message"]["content"])
               for message in outcome["messages"] if message["type"] == "message.completed"]
    return outcome, replies, conversation


async def test_a_plugin_runner_activates_a_skill_and_its_next_run_finds_it_active(
        llm_plugin_gateway, user, project):
    await Skill.objects.acreate(name="tides", description="Reads tide tables.",
                                instructions="Give times in 24-hour form.", revision="r1")
    await Skill.objects.acreate(name="ferries", description="Reads timetables.",
                                instructions="Name the pier.", revision="r1")
    agent_type = await AgentType.objects.acreate(name="Skilled", slug="skilled",
                                                 runner_id=SKILL_USER, skills=["tides"])
    agent = await AgentInstance.objects.acreate(name="Skilled", project=project,
                                                agent_type=agent_type)

    first, (activated,), conversation = await say(user, agent, "activate tides")
    refused, _, _ = await say(user, agent, "activate ferries", conversation)
    _, (later,), _ = await say(user, agent, "which?", conversation)
    _, (elsewhere,), _ = await say(user, agent, "which?")

    assert first["status"] == "completed", first
    assert activated["skill"] == "tides" and activated["active"] == ["tides"]
    assert "Give times in 24-hour form." in activated["text"]
    assert later == {"active": ["tides"], "granted": ["tides"]}
    assert elsewhere == {"active": None, "granted": ["tides"]}
    # A skill not granted to the run is refused; the run says why.
    assert refused["status"] == "failed" and "no skill 'ferries' is granted" in \
        refused["status_reason"]
    recorded = [event["type"] for event in await readers.run_events(first["run_id"])]
    assert {"tool.call.started", "tool.call.completed", "state.updated"} <= set(recorded)
