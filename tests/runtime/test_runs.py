"""run_runner against the real runtime: results, failures, cancel, deadline, in-run APIs."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from runtime_helpers import QA, collect, run_context, wait_until

from tests.timing import well_before

# One runtime for the whole module: these tests only run runners.
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.processes]

ALL_PULL_APIS = {
    "state": True,
    "run_get": True,
    "history_page": True,
    "event_get": True,
    "event_page": True,
    "steering_pull": True,
    "prompt_get": True,
}


@pytest.fixture
def link(shared_link):
    return shared_link


def cancel_marker(runtime_dir, context):
    """The file the slow runner writes when its task is cancelled."""
    return runtime_dir / "data/plugins/e2e__agent-runner-qa" / f"cancelled-{context['run_id']}"


def types(results):
    return [r["type"] for r in results]


async def test_echo_run_yields_message_state_and_completion(link):
    context = run_context("hello")
    results = await collect(link, "default", context)
    assert types(results) == ["message.completed", "state.updated", "run.completed"]
    assert [r["sequence"] for r in results] == [1, 2, 3]
    assert {r["run_id"] for r in results} == {context["run_id"]}
    message = results[0]["data"]["message"]
    assert (message["role"], message["content"]) == ("assistant", "e2e echo: hello")
    assert results[1]["data"] == {
        "scope": "conversation",
        "key": "e2e.echo_count",
        "value": {"count": 1},
    }


async def test_echo_of_empty_input_is_an_empty_echo(link):
    results = await collect(link, "default", run_context(""))
    assert results[0]["data"]["message"]["content"] == "e2e echo: "


async def test_failing_runner_ends_with_run_failed_runner_exception(link):
    results = await collect(link, "failing", run_context())
    assert types(results) == ["run.failed"]
    assert results[0]["data"]["code"] == "runner.exception"
    assert "raised on purpose" in results[0]["data"]["error"]


async def test_unknown_runner_and_plugin_fail_as_results(link):
    missing_runner = await collect(link, "no-such-runner", run_context())
    missing_plugin = [
        r async for r in link.run_runner("e2e", "no-such-plugin", "default", run_context())
    ]
    assert missing_runner[0]["data"]["code"] == "runner.not_found"
    assert missing_plugin[0]["data"]["code"] == "runner.plugin_not_found"


async def test_garbage_runner_results_reach_the_host_unvalidated(link):
    results = await collect(link, "garbage", run_context())
    assert types(results) == [
        "message.completed",
        "message.completed",
        "message.delta",
        "state.updated",
        "e2e.unknown",
        "run.completed ",
        "message.completed",
        "message.completed",
        "run.completed",
    ]
    # Whatever the runner set, the runtime re-stamps sequences 1..N.
    assert [r["sequence"] for r in results] == list(range(1, 10))
    assert results[0]["data"] == {}
    assert results[1]["data"]["bogus"] is True
    assert results[2]["data"] == {"chunk": "not-a-chunk"}
    assert results[3]["data"]["scope"] == "galaxy"
    assert results[6]["data"] == "not an object" and results[6]["timestamp"] == "yesterday"
    assert results[6]["usage"] == {"prompt_tokens": "many"}
    assert results[7]["data"]["message"]["content"] == "garbage done"


async def test_deltas_arrive_live_not_batched(link):
    arrivals = []
    async for result in link.run_runner(*QA, "slow", run_context("deltas:4:0.2")):
        arrivals.append((time.monotonic(), result["type"]))
    assert [t for _, t in arrivals] == ["message.delta"] * 4 + ["run.completed"]
    gaps = [b[0] - a[0] for a, b in zip(arrivals, arrivals[1:4], strict=False)]
    assert all(gap > 0.1 for gap in gaps), gaps


async def test_closing_the_stream_early_cancels_the_slow_run(link, shared_runtime_dir):
    context = run_context("sleep please")
    marker = cancel_marker(shared_runtime_dir, context)
    stream = link.run_runner(*QA, "slow", context)
    first = await anext(stream)
    assert first["type"] == "message.delta"

    started = time.monotonic()
    await stream.aclose()
    await wait_until(marker.exists, 10.0, "the plugin's runner task to be cancelled")
    assert time.monotonic() - started < well_before(30)  # the slow runner's sleep
    # The plugin stays healthy for later runs.
    assert types(await collect(link, "default", run_context()))[-1] == "run.completed"


async def test_deadline_ends_the_slow_run_with_runner_timeout(link, shared_runtime_dir):
    context = run_context("sleep please", runtime={"deadline_at": time.time() + 1})
    marker = cancel_marker(shared_runtime_dir, context)
    started = time.monotonic()
    results = await collect(link, "slow", context)
    elapsed = time.monotonic() - started
    assert types(results) == ["message.delta", "run.failed"]
    assert results[1]["data"]["code"] == "runner.timeout"
    assert results[1]["data"]["retryable"] is True
    assert 0.8 < elapsed < well_before(30)  # the slow runner's sleep
    await wait_until(marker.exists, 10.0, "the timed-out runner task to be cancelled")


async def test_api_caller_gets_host_answers_and_a_coded_refusal(link, shared_host):
    context = run_context(
        "call",
        conversation={"conversation_id": "conv-1"},
        context={"available_apis": ALL_PULL_APIS},
        resources={"storage": {"plugin_storage": True}},
    )
    results = await collect(link, "api-caller", context)
    assert types(results) == ["message.completed", "run.completed"]
    report = json.loads(results[0]["data"]["message"]["content"])

    assert report["state_set"] == {"ok": {"success": True}}
    assert report["state_get"] == {"ok": {"value": {"n": 1}}}
    assert report["run_get"]["ok"]["run_id"] == context["run_id"]
    assert report["history_page"]["ok"]["items"] == []
    assert report["event_get"]["ok"]["event_id"] == "evt-1"
    assert report["event_page"]["ok"]["items"] == []
    assert report["steering_pull"] == {"ok": {"items": []}}
    assert report["get_prompt"] == {"ok": []}
    # The runtime relays only the host's message text; the code survives inside it.
    refusal = report["state_get_forbidden"]
    assert refusal["error"] == "host.action_error"
    assert "state.scope_not_enabled" in refusal["message"]

    # Binary storage went through the host, owned by the plugin the runtime names.
    assert report["plugin_storage_set"] == {"ok": None}
    assert report["plugin_storage_get"] == {"ok": b"\x00e2e".hex()}
    assert "e2e.blob" in report["plugin_storage_keys"]["ok"]
    assert report["plugin_storage_delete"] == {"ok": None}
    assert "storage.not_found" in report["plugin_storage_get_deleted"]["message"]
    assert ("plugin", "e2e/agent-runner-qa", "e2e.blob") not in shared_host.storage

    # Every run API call reached the host with the runtime-stamped caller identity.
    run_calls = [d for _, d in shared_host.calls if d.get("run_id") == context["run_id"]]
    assert len(run_calls) == 9
    assert {d["caller_plugin_identity"] for d in run_calls} == {"e2e/agent-runner-qa"}


async def test_api_caller_without_available_apis_is_refused_inside_the_plugin(link, shared_host):
    context = run_context("call")
    results = await collect(link, "api-caller", context)
    report = json.loads(results[0]["data"]["message"]["content"])
    del report["history_before"]  # what the context says, not a call
    assert all("skipped" in outcome for outcome in report.values())
    assert not [d for _, d in shared_host.calls if d.get("run_id") == context["run_id"]]


async def test_more_runs_than_the_runtime_admits_are_queued_not_refused(link):
    async def one(i):
        return types(await collect(link, "default", run_context(f"n{i}")))

    outcomes = await asyncio.gather(*(one(i) for i in range(160)))
    assert all(outcome[-1] == "run.completed" for outcome in outcomes)
