"""How runs end, with the real runtime and the QA fixture plugin's runners."""

import asyncio
import json
import time

import pytest
from asgiref.sync import sync_to_async

from ledger.models import AgentRun, AgentRunEvent, Transcript
from ledger.services import leases
from runners.execution.orchestrator import Orchestrator
from runners.protocol import AgentBinding, AgentEventEnvelope, new_run_id
from runners.runtime.host_process import host_process
from tests.timing import scaled, well_before

pytestmark = [pytest.mark.processes, pytest.mark.asyncio(loop_scope="session"), pytest.mark.django_db(transaction=True)]


def runner(name: str) -> str:
    return f"plugin:e2e/agent-runner-qa/{name}"


def binding(name: str, **config) -> AgentBinding:
    return AgentBinding(binding_id=f"test-{name}", runner_id=runner(name), runner_config=config,
                        state_policy={"state_scopes": ["conversation"]})


def event(text: str = "hi", **fields) -> AgentEventEnvelope:
    return AgentEventEnvelope(conversation_id="conv-outcomes", input={"text": text}, **fields)


async def test_failing_runner_ends_failed_with_the_reason(qa_gateway):
    outcome = await Orchestrator(qa_gateway).run_to_end(event(), binding("failing"))

    assert outcome["status"] == "failed"
    assert "runner.exception" in outcome["status_reason"]


async def test_a_slow_runner_past_its_timeout_ends_timeout_without_being_waited_for(qa_gateway):
    started = time.monotonic()
    outcome = await Orchestrator(qa_gateway).run_to_end(event(), binding("slow", timeout=1,
                                                                          sleep=30))

    assert outcome["status"] == "timeout"
    assert time.monotonic() - started < well_before(30)


async def test_cancel_stops_a_silent_runner_without_waiting_for_it(qa_gateway):
    orchestrator, run_id = Orchestrator(qa_gateway), new_run_id()
    stream = orchestrator.run(event(), binding("slow", sleep=30), run_id=run_id)
    first = await anext(stream)  # the runner's one delta; then it sleeps
    assert first.type == "message.delta"

    cancelled_at = time.monotonic()
    consume = asyncio.ensure_future(anext(stream, None))
    await asyncio.sleep(0.05)
    await orchestrator.cancel(run_id, "operator pressed cancel")
    assert await asyncio.wait_for(consume, scaled(30)) is None

    run = await AgentRun.objects.aget(run_id=run_id)
    assert (run.status, run.status_reason) == ("cancelled", "operator pressed cancel")
    assert run.cancel_requested_at is not None
    assert time.monotonic() - cancelled_at < well_before(30)
    plugin_dir = qa_gateway.plugins_dir / "e2e__agent-runner-qa"
    for _ in range(round(scaled(20))):  # the plugin notes the cancel it received
        if (plugin_dir / f"cancelled-{run_id}").exists():
            break
        await asyncio.sleep(0.05)
    assert (plugin_dir / f"cancelled-{run_id}").exists()


async def test_what_the_host_records_for_a_run_counts_against_its_cap(qa_gateway, settings):
    settings.LANGHOST_RUN_MAX_STORED_BYTES = 2000
    orchestrator, run_id = Orchestrator(qa_gateway), new_run_id()
    stream = orchestrator.run(event(), binding("slow", sleep=30), run_id=run_id)
    assert (await anext(stream)).type == "message.delta"  # then it sleeps

    ending = asyncio.ensure_future(anext(stream, None))
    await host_process().handle(run_id).record("tool.call.started", {"parameters": "p" * 3000})

    assert await asyncio.wait_for(ending, scaled(5.0)) is None
    run = await AgentRun.objects.aget(run_id=run_id)
    assert run.status == "failed" and "run.output_limit" in run.status_reason


async def test_a_cancel_flagged_only_in_the_ledger_stops_the_run_without_waiting_for_it(
        qa_gateway):
    # What the admin's Cancel action does: it writes the flag and leaves the run loop alone.
    run_id = new_run_id()
    stream = Orchestrator(qa_gateway).run(event(), binding("slow", sleep=30), run_id=run_id)
    await anext(stream)
    consume = asyncio.ensure_future(anext(stream, None))

    flagged_at = time.monotonic()
    await leases.request_cancel(run_id, "cancelled in the admin")
    assert await asyncio.wait_for(consume, scaled(30)) is None

    run = await AgentRun.objects.aget(run_id=run_id)
    assert (run.status, run.status_reason) == ("cancelled", "cancelled in the admin")
    assert time.monotonic() - flagged_at < well_before(30)


async def test_cancels_flagged_in_the_ledger_stop_only_the_runs_they_name(qa_gateway):
    orchestrator = Orchestrator(qa_gateway)
    streams = {}
    for name in ("first", "second", "kept"):
        run_id = new_run_id()
        streams[name] = (run_id, orchestrator.run(event(), binding("slow", sleep=30),
                                                  run_id=run_id))
        await anext(streams[name][1])
    ends = {name: asyncio.ensure_future(anext(stream, None))
            for name, (_, stream) in streams.items()}
    try:
        await leases.request_cancel(streams["first"][0], "first cancelled")
        await leases.request_cancel(streams["second"][0], "second cancelled")
        await asyncio.wait_for(asyncio.gather(ends["first"], ends["second"]), scaled(3.0))
        still_running = not ends["kept"].done()
    finally:
        await orchestrator.cancel(streams["kept"][0])
        await ends["kept"]

    reasons = {name: (await AgentRun.objects.aget(run_id=run_id)).status_reason
               for name, (run_id, _) in streams.items()}
    assert reasons == {"first": "first cancelled", "second": "second cancelled",
                       "kept": "cancelled by request"}
    assert still_running


async def test_results_are_journaled_while_the_run_is_still_running(qa_gateway):
    orchestrator, run_id = Orchestrator(qa_gateway), new_run_id()
    stream = orchestrator.run(event(), binding("slow", sleep=30), run_id=run_id)
    await anext(stream)  # the runner's one delta; then it sleeps
    consume = asyncio.ensure_future(anext(stream, None))

    types = []
    for _ in range(round(scaled(20))):
        types = [e.type async for e in AgentRunEvent.objects.filter(run_id=run_id)]
        if types:
            break
        await asyncio.sleep(0.05)
    run = await AgentRun.objects.aget(run_id=run_id)
    await orchestrator.cancel(run_id)
    await consume

    assert types == ["message.delta"]
    assert run.status == "running"


async def test_caller_going_away_cancels_the_run(qa_gateway):
    run_id = new_run_id()
    stream = Orchestrator(qa_gateway).run(event(), binding("slow", sleep=30), run_id=run_id)
    await anext(stream)
    await stream.aclose()

    run = await AgentRun.objects.aget(run_id=run_id)
    assert (run.status, run.status_reason) == ("cancelled", "consumer_cancelled")


async def test_garbage_runner_results_are_dropped_and_the_run_ends_cleanly(qa_gateway):
    outcome = await Orchestrator(qa_gateway).run_to_end(event(), binding("garbage"))

    assert outcome["status"] == "completed"
    assert [m["data"]["message"]["content"] for m in outcome["messages"]] == ["garbage done"]
    events = [e async for e in AgentRunEvent.objects.filter(run_id=outcome["run_id"])]
    dropped = [e for e in events if e.type == "result.dropped"]
    assert len(dropped) >= 4 and all(e.source == "host" for e in dropped)
    assert "e2e.unknown" in {e.type for e in events}  # unknown types are kept, not acted on
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    # Its reply claims the user's role: the transcript keeps it as the assistant's turn.
    replies = [(t.role, t.content) async for t in Transcript.objects.filter(
        run_id=outcome["run_id"])]
    assert replies == [("assistant", "garbage done")]


async def test_same_event_id_twice_runs_once(qa_gateway):
    orchestrator = Orchestrator(qa_gateway)
    first = await orchestrator.run_to_end(event(event_id="dup-event-1"), binding("default"))
    second = await orchestrator.run_to_end(event(event_id="dup-event-1"), binding("default"))

    assert second["run_id"] == first["run_id"]
    assert [m["data"] for m in second["messages"]] == [m["data"] for m in first["messages"]]
    assert await AgentRun.objects.filter(event_id="dup-event-1").acount() == 1


async def test_in_run_apis_answer_within_policy_and_refuse_outside_it(qa_gateway):
    outcome = await Orchestrator(qa_gateway).run_to_end(event(), binding("api-caller"))

    report = json.loads(outcome["messages"][0]["data"]["message"]["content"])
    assert report["state_set"] == {"ok": {"success": True}}
    assert report["state_get"] == {"ok": {"value": {"n": 1}}}
    assert report["run_get"]["ok"]["status"] == "running"
    assert "ok" in report["history_page"] and "ok" in report["event_get"]
    assert "ok" in report["steering_pull"]
    assert "error" in report["state_get_forbidden"] or "skipped" in report["state_get_forbidden"]


async def test_a_runner_learns_where_the_conversations_history_ends_before_its_message(
        qa_gateway):
    def in_conversation(n: int) -> AgentEventEnvelope:
        return AgentEventEnvelope(event_id=f"cursor-{n}", conversation_id="cursor-conv",
                                  input={"text": f"message {n}"})

    first = await Orchestrator(qa_gateway).run_to_end(in_conversation(1), binding("api-caller"))
    second = await Orchestrator(qa_gateway).run_to_end(in_conversation(2),
                                                       binding("api-caller"))

    def history_before(outcome):
        return json.loads(outcome["messages"][0]["data"]["message"]["content"])["history_before"]

    last_of_first = await Transcript.objects.filter(conversation_id="cursor-conv",
                                                    run_id=first["run_id"]).alatest("pk")
    assert history_before(first) == {"latest_cursor": None, "has_history_before": False}
    assert history_before(second) == {"latest_cursor": str(last_of_first.pk),
                                      "has_history_before": True}


async def test_a_reply_streamed_as_snapshots_is_the_text_once(qa_gateway):
    # As LangBot's n8n runner streams: every delta the whole text so far, then a final delta
    # repeating it, and no message of its own.
    text = "one two three four five"

    outcome = await Orchestrator(qa_gateway).run_to_end(
        AgentEventEnvelope(event_id="snapshots-1", conversation_id="snapshots-conv",
                           input={"text": text}),
        AgentBinding(binding_id="snapshots", runner_id="plugin:e2e/agent-runner-qa/snapshots"))

    deltas = [m["data"]["chunk"]["content"] for m in outcome["messages"]
              if m["type"] == "message.delta"]
    completed = [m for m in outcome["messages"] if m["type"] == "message.completed"]
    assert "".join(deltas) == text
    assert [m["data"]["message"]["content"] for m in completed] == [text]
    events = await sync_to_async(list)(AgentRunEvent.objects.filter(
        run_id=outcome["run_id"]).values_list("sequence", "type"))
    assert (completed[0]["sequence"], "message.completed") in events
    assert [type_ for _, type_ in events][-2:] == ["message.completed", "run.completed"]
    transcript = await sync_to_async(list)(Transcript.objects.filter(
        conversation_id="snapshots-conv", role="assistant").values_list("content", flat=True))
    assert transcript == [text]
