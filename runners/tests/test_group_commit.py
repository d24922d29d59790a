"""The runs of one process commit together what they write at the same time, and one run's
bad write fails that run alone."""

import asyncio

import pytest
from django.db import IntegrityError

from ledger.models import AgentRunEvent
from ledger.services import runs as ledger
from runners.execution.journal import GroupCommit
from tests.timing import scaled

pytestmark = [pytest.mark.backend, pytest.mark.asyncio(loop_scope="session"), pytest.mark.django_db(transaction=True)]


async def start(run_id: str) -> None:
    await ledger.start_run(run={"run_id": run_id, "event_id": f"event-{run_id}",
                                "runner_id": "builtin:echo"},
                           event_log={"event_id": f"event-{run_id}",
                                      "idempotency_key": f"event-{run_id}",
                                      "event_type": "message.received"},
                           user_transcript=None, owner_id="test-host", scope_keys={})


def results(run_id: str, sequence: int) -> ledger.RunResults:
    return ledger.RunResults(run_id, [ledger.ResultWrite(sequence, "message.delta",
                                                         {"chunk": f"{run_id}-{sequence}"})])


@pytest.fixture
def transactions(monkeypatch) -> tuple[list[list[str]], asyncio.Event]:
    """The runs each transaction wrote for, in order, and the event that releases the first
    one (held until the test sets it)."""
    seen: list[list[str]] = []
    release = asyncio.Event()
    one, many = ledger.record_results, ledger.record_many

    async def record_results(run_id, writes, model_calls=(), start=None):
        seen.append([run_id])
        if len(seen) == 1:
            await release.wait()
        return await one(run_id, writes, model_calls, start)

    async def record_many(batch):
        seen.append([item.run_id for item in batch])
        return await many(batch)

    monkeypatch.setattr(ledger, "record_results", record_results)
    monkeypatch.setattr(ledger, "record_many", record_many)
    return seen, release


async def test_what_runs_write_while_a_commit_is_under_way_goes_in_one_transaction(
        transactions):
    seen, release = transactions
    for run_id in ("a", "b", "c"):
        await start(run_id)
    commit = GroupCommit()

    first = asyncio.ensure_future(commit.record(results("a", 1)))
    while not seen:
        await asyncio.sleep(0)
    others = [asyncio.ensure_future(commit.record(results(run_id, 1))) for run_id in "bc"]
    await asyncio.sleep(0)
    release.set()
    await asyncio.wait_for(asyncio.gather(first, *others), scaled(10))

    assert seen == [["a"], ["b", "c"]]
    stored = [row async for row in AgentRunEvent.objects.order_by("run_id").values_list(
        "run_id", "data_json")]
    assert stored == [("a", {"chunk": "a-1"}), ("b", {"chunk": "b-1"}), ("c", {"chunk": "c-1"})]


async def test_a_write_that_fails_in_a_shared_transaction_fails_its_run_alone(transactions):
    seen, release = transactions
    for run_id in ("a", "b", "c"):
        await start(run_id)
    await ledger.record_many([results("b", 1)])  # b's first result, stored already
    seen.clear()
    commit = GroupCommit()

    first = asyncio.ensure_future(commit.record(results("a", 1)))
    while not seen:
        await asyncio.sleep(0)
    again = asyncio.ensure_future(commit.record(results("b", 1)))
    other = asyncio.ensure_future(commit.record(results("c", 1)))
    await asyncio.sleep(0)
    release.set()
    outcomes = await asyncio.wait_for(asyncio.gather(first, again, other,
                                                     return_exceptions=True), scaled(10))

    assert outcomes[0] is None and outcomes[2] is None
    assert isinstance(outcomes[1], IntegrityError)
    assert seen == [["a"], ["b", "c"], ["b"], ["c"]]
    assert [row async for row in AgentRunEvent.objects.order_by("run_id", "sequence")
            .values_list("run_id", "sequence")] == [("a", 1), ("b", 1), ("c", 1)]
