"""Skills end to end: installed from a zip over REST (by superusers; a zip with a path out of
its package or past the skill store's limits refused, naming `file`), granted to an agent
type, activated by the built-in LLM agent in one run (its instructions, its files in the box
workspace), and active from the start of the conversation's next run: in its
`resources.skills`, its state `host.activated_skills` and its system prompt."""

import io
import json
import zipfile

import pytest
from asgiref.sync import sync_to_async

from ledger.models import AgentRun, AgentRunnerState
from runners.box.server import box_server
from runners.conversations.input import Part
from runners.models import LLM_AGENT_RUNNER_ID
from runners.skills.models import Skill
from runners.tests.conversation_fixtures import through_the_door
from tests.fake_providers import Reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

INSTRUCTIONS = "When asked about tides, read tides.csv and answer in UTC."


def zipped(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


TIDE_READER = zipped({
    "tide-reader/SKILL.md": f"---\nname: tide-reader\ndescription: Reads tide tables.\n---\n\n"
                            f"{INSTRUCTIONS}\n".encode(),
    "tide-reader/tides.csv": b"day,high\nmon,07:15\n"})


def upload(client, data: bytes, name="skills.zip"):
    file = io.BytesIO(data)
    file.name = name
    return client.post("/api/v1/skills", {"file": file}, format="multipart")


def test_a_superuser_installs_skills_from_a_zip_and_others_read_them(
        superuser_client, user_client):
    installed = upload(superuser_client, TIDE_READER)

    assert installed.status_code == 201, installed.content
    (skill,) = installed.json()
    assert (skill["name"], skill["description"]) == ("tide-reader", "Reads tide tables.")
    assert skill["instructions"].strip() == INSTRUCTIONS
    assert sorted(skill["files"]) == ["SKILL.md", "tides.csv"]
    assert user_client.get("/api/v1/skills/tide-reader").json()["name"] == "tide-reader"
    assert upload(user_client, TIDE_READER).status_code == 403


@pytest.mark.parametrize(("files", "reason"), [
    ({"../evil/SKILL.md": b"---\nname: evil\ndescription: x\n---\nx"}, "unsafe path"),
    ({"big/SKILL.md": b"---\nname: big\ndescription: x\n---\nx",
      "big/zeros.bin": bytes(4 * 1024 * 1024)}, "compression"),
])
def test_a_zip_the_skill_store_refuses_is_a_400_naming_the_file(
        superuser_client, files, reason):
    refused = upload(superuser_client, zipped(files))

    assert refused.status_code == 400
    assert "file" in refused.json()["errors"]
    assert reason in json.dumps(refused.json()).lower()
    assert not Skill.objects.exists()


async def ask(user, agent, text, conversation=None):
    return await through_the_door(user, agent, [Part(text=text)], conversation)


async def test_an_activated_skill_is_active_from_the_start_of_the_next_run(
        superuser_client, user, project, make_agent_type, make_agent, make_model,
        openai_server):
    assert (await sync_to_async(upload)(superuser_client, TIDE_READER)).status_code == 201
    await sync_to_async(make_model)(openai_server, "skilled-model")
    agent_type = await sync_to_async(make_agent_type)(
        name="Tides", runner_id=LLM_AGENT_RUNNER_ID, primary_model="skilled-model",
        skills=["tide-reader"], box_enabled=True)
    agent = await sync_to_async(make_agent)(project, agent_type)
    openai_server.script(
        Reply(text="", tool_calls=[{"id": "call-skill", "name": "activate_skill",
                                    "arguments": '{"name": "tide-reader"}'}]),
        Reply(text="Activated."), Reply(text="High tide is at 07:15 UTC."))
    try:
        first, conversation = await ask(user, agent, "I will ask about tides.")
        (activation,) = [m["content"] for m in openai_server.calls()[1].body["messages"]
                         if m["role"] == "tool"]
        second, _ = await ask(user, agent, "When is high tide on Monday?", conversation)
    finally:
        await box_server().stop()

    assert first["status"] == second["status"] == "completed"
    assert INSTRUCTIONS in activation and "tides.csv" in activation
    assert INSTRUCTIONS not in openai_server.calls()[0].body["messages"][0]["content"]
    assert INSTRUCTIONS in openai_server.calls()[2].body["messages"][0]["content"]
    run = await AgentRun.objects.aget(run_id=second["run_id"])
    assert (await sync_to_async(run.authorization)())["resources"]["skills"][0]["skill_name"] == "tide-reader"
    kept = await AgentRunnerState.objects.aget(scope="conversation",
                                               state_key="host.activated_skills")
    assert kept.value_json == ["tide-reader"]
