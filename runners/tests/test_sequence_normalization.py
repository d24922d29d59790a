"""Sequence normalization of a result stream, and what a run's events count against its cap.

The pinned runtime re-stamps sequences 1..N, so duplicates and negatives cannot arrive through
it; a scripted stream stands in for a runner reached some other way (a built-in, a future
runtime) to prove the host's own rules.
"""

import pytest

from ledger.models import AgentRunEvent
from runners.execution.deltas import MERGED_FROM
from runners.execution.orchestrator import Orchestrator
from runners.models import RunnerDescriptor
from runners.protocol import AgentBinding, AgentEventEnvelope

pytestmark = pytest.mark.django_db(transaction=True)


def result(sequence, text, type_="message.completed"):
    data = {"message": {"role": "assistant", "content": text}} if type_ == "message.completed" else {}
    return {"run_id": None, "type": type_, "data": data, "sequence": sequence}


class ScriptedGateway:
    answers_host_actions_here = True  # its runner asks the host nothing

    def __init__(self, results):
        self.results = results

    async def discover(self):
        pass

    async def run_runner(self, descriptor, context, item_timeout):
        for item in self.results:
            yield item


async def run_script(results):
    await RunnerDescriptor.objects.acreate(id="plugin:test/scripted/seq", source="plugin",
                                           plugin_author="test", plugin_name="scripted",
                                           runner_name="seq")
    binding = AgentBinding(binding_id="scripted", runner_id="plugin:test/scripted/seq")
    return await Orchestrator(ScriptedGateway(results)).run_to_end(AgentEventEnvelope(), binding)


async def test_duplicate_sequence_is_dropped_and_not_delivered():
    outcome = await run_script([result(1, "a"), result(1, "again"), result(2, "b"),
                                result(3, None, "run.completed")])

    assert [m["data"]["message"]["content"] for m in outcome["messages"]] == ["a", "b"]
    assert outcome["status"] == "completed"


async def test_missing_zero_and_negative_sequences_are_reassigned():
    outcome = await run_script([result(None, "a"), result(0, "b"), result(-5, "c"),
                                result("x", "d"), result(None, None, "run.completed")])

    assert [m["data"]["message"]["content"] for m in outcome["messages"]] == ["a", "b", "c", "d"]


async def test_gap_is_accepted_and_ledger_sequences_stay_contiguous():
    outcome = await run_script([result(1, "a"), result(7, "b"), result(8, None, "run.completed")])

    assert [m["data"]["message"]["content"] for m in outcome["messages"]] == ["a", "b"]
    sequences = [s async for s in AgentRunEvent.objects.filter(run_id=outcome["run_id"])
                 .values_list("sequence", flat=True)]
    assert sequences == [1, 2, 3]


async def test_a_runners_claim_to_have_merged_earlier_results_is_ignored():
    # Believed, the claim would mark sequences 1-5 as seen (however many it names).
    outcome = await run_script([{**result(5, "a"), MERGED_FROM: 1}, result(2, "b"),
                                result(6, None, "run.completed")])

    assert [m["data"]["message"]["content"] for m in outcome["messages"]] == ["a", "b"]
    assert outcome["status"] == "completed"


async def test_result_without_a_type_fails_the_run():
    outcome = await run_script([result(1, "a"), {"sequence": 2, "data": {}}])

    assert outcome["status"] == "failed"
    assert "without a type" in outcome["status_reason"]


async def test_stream_ending_without_a_terminal_result_fails_the_run():
    outcome = await run_script([result(1, "a")])

    assert outcome["status"] == "failed"
    assert "ended without" in outcome["status_reason"]


async def test_results_of_an_unknown_type_count_against_the_runs_cap(settings):
    settings.LANGHOST_RUN_MAX_STORED_BYTES = 1000
    blob = {"type": "e2e.custom", "sequence": 1, "data": {"blob": "y" * 2000}}

    outcome = await run_script([blob, result(2, None, "run.completed")])

    assert outcome["status"] == "failed" and "run.output_limit" in outcome["status_reason"]
