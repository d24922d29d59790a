"""The run loop's writes: runs started once, results stored whole and in order, state upserted,
runs ended once, rows stored as the ORM would store them."""

from datetime import UTC, datetime, timedelta, timezone

import pytest
from asgiref.sync import async_to_sync
from django.db import connection

from ledger.models import AgentRun, AgentRunEvent, AgentRunnerState, Transcript
from ledger.services import runs as services
from ledger.services.state import StateWrite
from ledger.sql import insert_rows, update_rows

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.backend]

start_run = async_to_sync(services.start_run)
record_results = async_to_sync(services.record_results)


def started(run_id: str = "run-1", event_id: str = "event-1") -> dict:
    return start_run(run={"run_id": run_id, "event_id": event_id, "runner_id": "builtin:echo"},
                     event_log={"event_id": event_id, "idempotency_key": event_id,
                                "event_type": "message.received"},
                     user_transcript=None, owner_id="test-host",
                     scope_keys={"conversation": "c1"}).state


def state_write(value) -> StateWrite:
    return StateWrite(scope="conversation", scope_key="c1", state_key="count",
                               value=value, identity={"runner_id": "builtin:echo",
                                                      "conversation_id": "conv-1"})


def test_a_burst_of_results_is_stored_whole_and_in_order():
    started()
    writes = [services.ResultWrite(sequence=n, type="message.delta", data={"chunk": str(n)})
              for n in range(1, 10_001)]  # written in several statements

    record_results("run-1", writes)

    stored = list(AgentRunEvent.objects.filter(run_id="run-1").values_list("sequence", "data_json"))
    assert stored == [(n, {"chunk": str(n)}) for n in range(1, 10_001)]


def test_the_same_event_id_starts_one_run():
    started("run-1", "event-1")

    with pytest.raises(services.DuplicateEvent) as duplicate:
        started("run-2", "event-1")

    assert duplicate.value.run_id == "run-1"
    assert list(AgentRun.objects.values_list("run_id", flat=True)) == ["run-1"]


def test_state_writes_to_one_key_keep_one_row_with_the_last_value():
    started()
    record_results("run-1", [services.ResultWrite(1, "state.updated", {}, state=state_write(1))])
    first = AgentRunnerState.objects.get(scope_key="c1", state_key="count")

    record_results("run-1", [services.ResultWrite(2, "state.updated", {}, state=state_write({"n": 2}))])

    row = AgentRunnerState.objects.get(scope_key="c1", state_key="count")
    assert row.value_json == {"n": 2}
    assert (row.pk, row.created_at, row.conversation_id) == (first.pk, first.created_at, "conv-1")
    assert row.updated_at > first.updated_at
    assert started("run-2", "event-2")["conversation"] == {"count": {"n": 2}}


def test_a_run_ends_once_and_keeps_its_first_ending():
    started()
    ended = record_results("run-1", [services.ResultWrite(
        1, "run.completed", {}, finish=("completed", "stop", {"tokens": 3}, False))])

    again = async_to_sync(services.finish_run)("run-1", "failed", "too late")

    run = AgentRun.objects.get(run_id="run-1")
    assert (ended["status"], ended["status_reason"]) == ("completed", "stop")
    assert (again["status"], again["status_reason"]) == ("completed", "stop")
    assert (run.status, run.usage_json, run.lease_expires_at) == ("completed", {"tokens": 3}, None)
    assert run.finished_at is not None


def test_rows_are_stored_as_the_orm_stores_them():
    values = {"conversation_id": "conv-1", "role": "user", "content": "hi",
              "content_json": {"role": "user", "content": []}}
    Transcript.objects.create(**values)
    insert_rows(Transcript, [values])

    by_orm, by_insert = Transcript.objects.order_by("id").values()
    assert {k: v for k, v in by_insert.items() if k not in ("id", "created_at")} == {
        k: v for k, v in by_orm.items() if k not in ("id", "created_at")}
    assert by_insert["item_type"] == "message" and by_insert["attachment_refs"] == []
    assert by_insert["created_at"] is not None


def test_json_and_aware_datetimes_are_written_byte_for_byte_as_the_orm_writes_them():
    # An offset other than UTC: the database keeps the instant, as the ORM converts it.
    at = datetime(2026, 11, 26, 13, 30, 5, 123456, tzinfo=timezone(timedelta(hours=2)))
    values = {"event_id": "event-x", "runner_id": "builtin:echo", "status": "running",
              "started_at": at, "deadline_at": at.astimezone(UTC) + timedelta(seconds=30),
              "authorization_json": {"apis": {"state": True}, "tools": ["a", "b"], "n": 1.5},
              "usage_json": [1, {"two": None}]}
    AgentRun.objects.create(run_id="by-orm", **values)
    insert_rows(AgentRun, [{"run_id": "by-insert", **values}])
    ended = {"finished_at": at + timedelta(seconds=1), "usage_json": {"tokens": 3}}
    AgentRun.objects.filter(run_id="by-orm").update(**ended)
    update_rows(AgentRun, ended, "run_id = %s", ["by-insert"])

    columns = "started_at, deadline_at, finished_at, authorization_json, usage_json"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {columns} FROM agent_run ORDER BY run_id")
        by_insert, by_orm = cursor.fetchall()
    assert by_insert == by_orm
