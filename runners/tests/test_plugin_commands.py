"""A plugin's `Command`, run as LangBot runs one: a message that starts with its agent type's
command prefix and a command's name runs the command (its subcommand picked by the plugin
from the words after it) instead of the agent's runner, and each of its replies is a message
of the run; any other message reaches the runner. Real runtime, fixture plugin `e2e__commands`."""

import asyncio

import pytest
import pytest_asyncio
from asgiref.sync import sync_to_async
from django.contrib.admin.utils import quote

from ledger.models import AgentRun, Transcript
from runners.conversations import background
from runners.conversations.input import Part
from runners.models import AgentInstance, AgentType, CommandDescriptor, PluginInstallation
from runners.tests.conversation_fixtures import register_builtin, through_the_door  # noqa: F401
from runners.tests.test_multitask import (  # noqa: F401
    new_conversation,
    queued_then_orphaned,
    turns_agent,
)
from tests.timing import scaled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

ECHO_COMMAND = "command:e2e/commands/echo"


@pytest_asyncio.fixture
async def commands_gateway(own_gateway):
    gateway = await own_gateway("e2e__commands")
    await gateway.discover(scaled(30))
    return gateway


async def echo_agent(project, prefix: str = "!") -> AgentInstance:
    """An agent whose runner is the built-in echo (`echo: <text>`)."""
    agent_type = await AgentType.objects.acreate(name=f"Echoer {prefix!r}",
                                                 slug=f"echoer-{len(prefix)}",
                                                 command_prefix=prefix)
    return await AgentInstance.objects.acreate(name="Echo", project=project, agent_type=agent_type)


async def say(user, agent, text: str) -> tuple[dict, list[str]]:
    outcome, _ = await through_the_door(user, agent, [Part(text=text)])
    return outcome, [message["data"]["message"]["content"] for message in outcome["messages"]
                     if message["type"] == "message.completed"]


async def test_a_command_answers_in_place_of_the_runner(commands_gateway, user, project,
                                                        superuser_client, admin_browser):
    agent = await echo_agent(project)

    said, replies = await say(user, agent, "  !echo hi there ")
    shouted, shouts = await say(user, agent, "!echo shout ahoy")
    asked, about = await say(user, agent, "!echo whoami")
    _, replied = await say(user, agent, "!echo reply")
    _, full_width = await say(user, agent, "！echo wide")

    assert (said["status"], replies) == ("completed", ["hi there"])
    # A subcommand gets the words after it; each reply is a message of the run.
    assert (shouted["status"], shouts) == ("completed", ["AHOY", "AHOY!"])
    # LangBot's parse: the words after the prefix, a user's privilege (1).
    assert about == ["privilege 1, params ['echo', 'whoami'], text 'echo whoami'"]
    # LangBot's second default prefix, the full-width `！`, is `!`'s too.
    assert full_width == ["wide"]
    # `ctx.reply` is a message of the run too, before what the command returns.
    assert replied == ["replied through ctx", "and returned"]
    runs = [run async for run in AgentRun.objects.filter(
        run_id__in=[said["run_id"], shouted["run_id"], asked["run_id"]])]
    assert {run.runner_id for run in runs} == {ECHO_COMMAND}
    listed = await CommandDescriptor.objects.aget(pk=ECHO_COMMAND)
    assert listed.available and listed.plugin_identity == "e2e/commands"
    plugins = (await sync_to_async(superuser_client.get)("/api/v1/plugins")).json()["data"]
    assert [plugin["commands"] for plugin in plugins if plugin["plugin_id"] == "e2e/commands"] \
        == [["echo"]]
    page = await sync_to_async(admin_browser.get)(
        f"/admin/runners/commanddescriptor/{quote(ECHO_COMMAND)}/change/")
    assert page.status_code == 200 and b"Says its words back" in page.content


async def test_a_superuser_is_an_administrator_and_an_image_is_saved_as_a_file(
        commands_gateway, superuser, project):
    agent = await echo_agent(project)

    _, about = await say(superuser, agent, "!echo whoami")
    _, (picture,) = await say(superuser, agent, "!echo picture")

    assert about == ["privilege 2, params ['echo', 'whoami'], text 'echo whoami'"]
    said, image = picture
    assert said == {"type": "text", "text": "a dot"}
    assert image["type"] == "file_url" and image["file_url"].endswith("?version=1")


async def test_a_command_that_fails_fails_its_run_saying_why(commands_gateway, user, project):
    agent = await echo_agent(project)

    failed, replies = await say(user, agent, "!echo boom")

    assert failed["status"] == "failed"
    assert "the echo broke" in failed["status_reason"]
    assert replies == ["about to fail"]


async def test_anything_else_reaches_the_runner(commands_gateway, user, project):
    agent = await echo_agent(project)
    no_prefix = await echo_agent(project, prefix="")

    _, unknown = await say(user, agent, "!unknown hi")
    _, plain = await say(user, agent, "echo hi")
    _, off = await say(user, no_prefix, "!echo hi")
    await PluginInstallation.objects.filter(author="e2e", name="commands").aupdate(enabled=False)
    _, disabled = await say(user, agent, "!echo hi")

    assert unknown == ["echo: !unknown hi"]
    assert plain == ["echo: echo hi"]
    assert off == ["echo: !echo hi"]
    assert disabled == ["echo: !echo hi"]


async def test_a_queued_command_whose_process_went_away_runs_where_it_is_adopted(
        commands_gateway, user, turns_agent):  # noqa: F811 (the fixture)
    conversation = await new_conversation(user, turns_agent)
    first, queued = await queued_then_orphaned(user, turns_agent, conversation, "!echo later")

    assert await background.resume_orphaned_runs() == [queued.run_id]
    await first
    for _ in range(int(scaled(100))):
        run = await AgentRun.objects.aget(run_id=queued.run_id)
        if run.is_terminal:
            break
        await asyncio.sleep(0.05)

    assert (run.status, run.runner_id) == ("completed", ECHO_COMMAND)
    replies = [row.content async for row in Transcript.objects.filter(
        conversation_id=conversation.conversation_id, role="assistant").order_by("id")]
    assert replies[-1] == "later"


async def test_a_queued_command_gone_before_it_is_adopted_fails_saying_so(
        commands_gateway, user, turns_agent):  # noqa: F811 (the fixture)
    conversation = await new_conversation(user, turns_agent)
    first, queued = await queued_then_orphaned(user, turns_agent, conversation, "!echo later")
    await PluginInstallation.objects.filter(author="e2e", name="commands").aupdate(enabled=False)

    assert await background.resume_orphaned_runs() == [queued.run_id]
    await first

    run = await AgentRun.objects.aget(run_id=queued.run_id)
    assert run.status == "failed"
    assert f"Command '{ECHO_COMMAND}' is not available" in run.status_reason
