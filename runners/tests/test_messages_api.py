"""`POST .../conversations/{id}/messages`: routed through the agent's tree, run through the
orchestrator with built-in runners; input files become artifacts; bad input writes nothing."""

import asyncio
import base64
import json

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.core.cache import cache

from ledger.models import AgentRun, Artifact, EventLog, Transcript
from ledger.services.artifacts import artifacts
from runners.conversations.callers import RunStartThrottle
from runners.models import AgentInstance, SubAgent
from runners.tests.conversation_fixtures import (  # noqa: F401
    conversations_url,
    read_body,
    register_builtin,
    reply_results,
)
from tests.timing import scaled

pytestmark = pytest.mark.backend

PLACEHOLDER = "Uploaded file: {}. It has been saved to the artifacts"


@pytest.fixture
def conversation(user_client, agent):
    response = user_client.post(conversations_url(agent), {}, format="json")
    return response.json()["id"]


@pytest.fixture
def send(user_client, agent, conversation):
    """`send(body, stream=False, client=None)` -> (response, parsed body or frames)."""

    def do_send(body, stream=False, client=None, conversation_id=None):
        url = f"{conversations_url(agent)}/{conversation_id or conversation}/messages"
        response = (client or user_client).post(url + ("?stream=1" if stream else ""), body,
                                                format="json")
        raw = read_body(response)
        if response.status_code != 201:
            return response, response.json()
        if stream:
            return response, [json.loads(line) for line in raw.decode().splitlines()]
        return response, json.loads(raw)

    return do_send


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def nothing_written():
    return not (AgentRun.objects.exists() or Transcript.objects.exists()
                or EventLog.objects.exists() or Artifact.objects.exists())


# --- replies --------------------------------------------------------------------------------

def test_echo_reply_names_the_answering_agent_and_is_journaled(send, agent, conversation):
    response, body = send({"text": "hello"})

    assert response.status_code == 201
    assert body["agent"] == agent.agent_type.name
    assert (body["status"], body["reply"]) == ("completed", {"role": "assistant",
                                                             "content": "echo: hello"})
    run = AgentRun.objects.get(run_id=body["run_id"])
    assert (run.agent_id, run.conversation_id, run.status) == \
        (str(agent.pk), conversation, "completed")
    entries = list(Transcript.objects.filter(conversation_id=conversation)
                   .values_list("author", "role", "content"))
    assert entries == [("user", "user", "hello"),
                       (agent.agent_type.name, "assistant", "echo: hello")]


def test_streamed_message_sends_ndjson_frames_ending_with_the_reply(send):
    response, frames = send({"text": "x"}, stream=True)

    assert response["Content-Type"] == "application/x-ndjson"
    assert [f["type"] for f in frames] == ["run.started", "message.completed", "run.finished"]
    assert frames[-1]["reply"]["content"] == "echo: x"
    assert frames[-1]["status"] == "completed"


def test_agent_is_working_during_the_run_and_idle_after(send, agent, builtin):
    seen = []

    async def probe(context):
        seen.append(await sync_to_async(
            lambda: AgentInstance.objects.get(pk=agent.pk).status)())
        for item in reply_results(context, "ok"):
            yield item

    agent.agent_type.runner_id = builtin("builtin:probe", probe)
    agent.agent_type.save()

    send({"text": "x"})

    agent.refresh_from_db()
    assert (seen, agent.status) == (["working"], "idle")


def test_agent_is_idle_again_after_a_failed_run(send, agent, builtin):
    async def broken(context):
        raise RuntimeError("boom")
        yield  # an async generator, as runners are

    agent.agent_type.runner_id = builtin("builtin:broken", broken)
    agent.agent_type.save()

    _, body = send({"text": "x"})

    agent.refresh_from_db()
    assert (body["status"], body["reply"], agent.status) == ("failed", None, "idle")
    assert "boom" in body["status_reason"]


def test_agent_is_idle_again_when_the_client_goes_away(user_client, agent, conversation,
                                                      builtin):
    """Django's ASGI handler cancels the response task when the client disconnects."""
    runner_started = asyncio.Event()

    async def slow(context):
        runner_started.set()
        await asyncio.sleep(30)
        yield reply_results(context, "too late")[0]

    agent.agent_type.runner_id = builtin("builtin:slow-probe", slow)
    agent.agent_type.save()
    response = user_client.post(f"{conversations_url(agent)}/{conversation}/messages?stream=1",
                                {"text": "x"}, format="json")
    status = sync_to_async(lambda: AgentInstance.objects.get(pk=agent.pk).status)

    async def send_then_disconnect():
        async def send_body():
            async for _ in aiter(response):
                pass

        sending = asyncio.create_task(send_body())
        await asyncio.wait_for(runner_started.wait(), scaled(5))
        during = await status()
        sending.cancel()
        await asyncio.gather(sending, return_exceptions=True)
        return during, await status()

    assert async_to_sync(send_then_disconnect)() == ("working", "idle")
    run = AgentRun.objects.get()
    assert (run.status, run.status_reason) == ("cancelled", "consumer_cancelled")


def test_metrics_count_the_completed_runs(send, agent, user_client):
    # Tokens and cost come from model calls (test_agent_metrics.py); echo makes none.
    send({"text": "one"})
    send({"text": "two"})

    metrics = user_client.get(
        f"/api/v1/projects/{agent.project_id}/agents/{agent.pk}/metrics").json()
    assert (metrics["total_tasks_completed"], metrics["total_tokens_used"]) == (2, 0)


# --- routing through the tree ---------------------------------------------------------------

@pytest.fixture
def tree(agent, make_agent_type, builtin):
    """The agent's type as root with `helper` (transferable) and `strict` (no transfer to
    parent); each child answers with its own built-in runner."""

    def answering(label):
        async def run(context):
            for item in reply_results(context, f"{label}: {context['input']['text']}"):
                yield item
        return run

    helper = make_agent_type(name="helper", runner_id=builtin("builtin:helper", answering("helper")))
    strict = make_agent_type(name="strict", disallow_transfer_to_parent=True,
                             runner_id=builtin("builtin:strict", answering("strict")))
    SubAgent.objects.create(parent=agent.agent_type, child=helper, position=0)
    SubAgent.objects.create(parent=agent.agent_type, child=strict, position=1)
    return {"helper": helper, "strict": strict}


def spoke(conversation, author):
    Transcript.objects.create(conversation_id=conversation, role="assistant", author=author,
                              content="(earlier)")


def test_last_transferable_agent_answers_with_its_own_runner(send, conversation, tree):
    spoke(conversation, "helper")

    _, body = send({"text": "hi"})

    assert (body["agent"], body["reply"]["content"]) == ("helper", "helper: hi")
    run = AgentRun.objects.get(run_id=body["run_id"])
    assert run.runner_id == "builtin:helper"
    assert Transcript.objects.filter(run_id=body["run_id"]).get().author == "helper"


def test_agent_that_disallows_transfer_hands_back_to_the_root(send, conversation, tree, agent):
    spoke(conversation, "strict")

    _, body = send({"text": "hi"})

    assert (body["agent"], body["reply"]["content"]) == (agent.agent_type.name, "echo: hi")


def test_reply_authorship_keeps_routing_on_the_next_message(send, conversation, tree):
    spoke(conversation, "helper")
    send({"text": "one"})

    _, body = send({"text": "two"})

    assert body["agent"] == "helper"


# --- refusals and bad input: nothing half-written -------------------------------------------

def test_paused_agent_refuses_with_409(send, agent):
    agent.transition("pause")

    response, body = send({"text": "x"})

    assert response.status_code == 409
    assert "is paused" in body["detail"]
    assert nothing_written()


def test_terminated_agent_refuses_with_410(send, agent):
    agent.transition("terminate")

    response, body = send({"text": "x"})

    assert response.status_code == 410
    assert "terminated" in body["detail"]
    assert nothing_written()


@pytest.mark.parametrize("payload", [{}, {"text": ""}, {"text": "   "}, {"attachments": []}])
def test_empty_message_answers_400(send, payload):
    response, body = send(payload)

    assert response.status_code == 400
    assert "needs text or at least one attachment" in body["detail"]
    assert nothing_written()


def test_unknown_conversation_answers_404(send):
    response, body = send({"text": "x"}, conversation_id="no-such-conversation")

    assert response.status_code == 404
    assert "not found" in body["detail"]
    assert nothing_written()


def test_another_users_conversation_answers_404(send, make_user, project):
    from rest_framework.test import APIClient

    member = make_user("bob@example.com")
    project.members.add(member)
    client = APIClient()
    client.force_authenticate(member)

    response, _ = send({"text": "x"}, client=client)

    assert response.status_code == 404
    assert nothing_written()


def test_oversize_attachment_answers_413(send, settings):
    settings.LANGHOST_ARTIFACT_MAX_BYTES = 16

    response, body = send({"text": "x", "attachments": [
        {"name": "ok.bin", "data": b64(b"small")},
        {"name": "big.bin", "data": b64(b"x" * 17)},
    ]})

    assert response.status_code == 413
    assert "attachments[1].data" in body["detail"] and "16-byte limit" in body["detail"]
    assert nothing_written()


def test_bad_base64_answers_400(send):
    response, body = send({"text": "x", "attachments": [{"name": "a", "data": "not base64!"}]})

    assert response.status_code == 400
    assert body["detail"] == "attachments[0].data is not valid base64."
    assert "attachments" in body["errors"]
    assert nothing_written()


def test_attachment_needs_exactly_one_of_data_or_url(send):
    response, body = send({"attachments": [{"name": "a"}]})

    assert response.status_code == 400
    assert "exactly one of data" in body["detail"]
    assert nothing_written()


def test_failed_artifact_save_fails_the_message_before_anything_is_written(send, monkeypatch):
    real_save = artifacts.save

    def save_then_fail(*args, **kwargs):
        if args[3].endswith("_2"):
            raise OSError("disk full")
        return real_save(*args, **kwargs)

    monkeypatch.setattr(artifacts, "save", save_then_fail)

    response, body = send({"attachments": [{"name": "a", "data": b64(b"a")},
                                           {"url": "https://example.com/b.pdf"},
                                           {"name": "c", "data": b64(b"c")}]})

    assert response.status_code == 503
    assert body["detail"].startswith("failed to save artifact artifact_e-")
    assert nothing_written()


# --- input files as artifacts ---------------------------------------------------------------

def test_b1_inline_blob_becomes_one_artifact_and_a_placeholder_part(send, conversation, user,
                                                                     agent):
    blob = bytes(range(256))
    scope = (str(agent.project_id), str(user.pk), conversation)

    _, body = send({"text": "here is a file", "attachments": [
        {"name": "data.bin", "mime_type": "application/octet-stream", "data": b64(blob)}]})

    (name,) = artifacts.list_names(*scope)
    assert name == f"artifact_{body['event_id']}_1" and name.startswith("artifact_e-")
    assert artifacts.load(*scope, name).data == blob
    entry = Transcript.objects.filter(conversation_id=conversation).first()
    parts = entry.content_json["content"]
    assert entry.author == "user" and len(parts) == 2
    assert parts[1] == {"type": "text", "text": PLACEHOLDER.format(name)}
    assert b64(blob) not in json.dumps([entry.content_json, entry.attachment_refs])
    # The runner's `input.text` joins the text parts, the placeholder among them.
    assert body["reply"]["content"] == f"echo: here is a file {PLACEHOLDER.format(name)}"


def test_b1_runner_input_carries_the_artifact_reference(send, agent, builtin, user_client):
    async def show_input(context):
        for item in reply_results(context, json.dumps(context["input"])):
            yield item

    agent.agent_type.runner_id = builtin("builtin:show-input", show_input)
    agent.agent_type.save()

    _, body = send({"text": "see file", "attachments": [
        {"name": "r.txt", "mime_type": "text/plain", "data": b64(b"report")}]})

    runner_input = json.loads(body["reply"]["content"])
    (attachment,) = runner_input["attachments"]
    name = attachment["id"]
    assert runner_input["contents"][1]["text"] == PLACEHOLDER.format(name)
    assert attachment["ref"] == f"artifact:{name}"
    assert (attachment["name"], attachment["mime_type"], attachment["size"]) == \
        ("r.txt", "text/plain", 6)
    # The runner's copy: inline, and a link signed for its run, which ended with it.
    assert attachment["content"] == f"data:text/plain;base64,{b64(b'report')}"
    assert f"/runs/{body['run_id']}/attachments/" in attachment["url"]
    assert user_client.get(attachment["url"]).status_code == 410


def test_b2_with_the_flag_off_the_blob_stays_inline(send, agent, conversation):
    agent.agent_type.save_input_blobs_as_artifacts = False
    agent.agent_type.save()

    send({"text": "inline", "attachments": [{"name": "a.bin", "data": b64(b"abc")}]})

    assert not Artifact.objects.exists()
    parts = Transcript.objects.filter(conversation_id=conversation).first().content_json["content"]
    assert parts[1] == {"type": "file_base64", "file_base64": b64(b"abc"), "file_name": "a.bin"}


def test_b3_blobs_at_positions_0_and_2_keep_part_1_untouched(send, conversation):
    send({"attachments": [{"name": "a", "data": b64(b"a")},
                          {"name": "b.pdf", "url": "https://example.com/b.pdf"},
                          {"name": "c", "data": b64(b"c")}]})

    parts = Transcript.objects.filter(conversation_id=conversation).first().content_json["content"]
    names = sorted(Artifact.objects.values_list("name", flat=True))
    assert [n[-2:] for n in names] == ["_0", "_2"]
    assert names[0].split("_")[1] == names[1].split("_")[1]  # one invocation id
    assert parts == [
        {"type": "text", "text": PLACEHOLDER.format(names[0])},
        {"type": "file_url", "file_url": "https://example.com/b.pdf", "file_name": "b.pdf"},
        {"type": "text", "text": PLACEHOLDER.format(names[1])},
    ]


# --- a user's rate of runs -------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
def test_a_user_starting_runs_too_fast_is_told_to_wait_and_others_are_not(
        send, monkeypatch, member_client, superuser_client, agent):
    cache.clear()
    monkeypatch.setattr(RunStartThrottle, "THROTTLE_RATES", {"run-starts": "2/minute"})

    answers = [send({"text": f"hello {n}"})[0] for n in range(3)]

    assert [answer.status_code for answer in answers] == [201, 201, 429]
    assert int(answers[-1]["Retry-After"]) > 0
    assert "Too many runs" in answers[-1].json()["detail"]
    assert AgentRun.objects.count() == 2  # the refused one wrote nothing
    theirs = member_client.post(conversations_url(agent), {}, format="json").json()["id"]
    assert send({"text": "mine"}, client=member_client, conversation_id=theirs)[0].status_code == 201
    run = superuser_client.post("/api/v1/runs", {"agent_id": str(agent.pk), "input": {
        "text": "the operator is not counted"}}, format="json")
    assert run.status_code == 201, run.json()
