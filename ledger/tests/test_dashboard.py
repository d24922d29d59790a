"""The dashboard's numbers against seeded runs and model calls.

The dashboard reads rollups. Rows seeded straight into the ledger are counted once the
rollups are rebuilt from it (as after a restore); runs and calls written through the ledger's
services are counted as they are written."""

import uuid
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest

from ledger.models import AgentRun, ModelCall
from ledger.selectors import dashboard
from ledger.selectors.dashboard import percentile
from ledger.services import model_calls, rollups
from ledger.services import runs as ledger

pytestmark = [pytest.mark.django_db, pytest.mark.backend]

NOW = datetime(2026, 3, 10, 12, 30, tzinfo=UTC)


def run_summary(**kwargs):
    rollups.rebuild()
    return dashboard.run_summary(now=NOW, **kwargs)


def model_call_days():
    rollups.rebuild()
    return dashboard.model_call_days(now=NOW)


def seed(status, *, hours_ago=1.0, duration=None, runner="plugin:a/b/c", reason=""):
    created = NOW - timedelta(hours=hours_ago)
    run = AgentRun.objects.create(run_id=str(uuid.uuid4()), event_id=str(uuid.uuid4()),
                                  runner_id=runner, status=status, status_reason=reason)
    fields = {"created_at": created}
    if duration is not None:
        fields.update(started_at=created, finished_at=created + timedelta(seconds=duration))
    AgentRun.objects.filter(pk=run.pk).update(**fields)
    return run


def test_percentile_is_nearest_rank():
    assert percentile([], 0.5) is None
    assert percentile([7.0], 0.95) == 7.0
    values = list(range(1, 101))
    assert percentile(values, 0.50) == 50
    assert percentile(values, 0.95) == 95
    assert percentile([4, 1, 3, 2], 0.5) == 2


def test_counts_durations_and_failures_match_the_seeded_ledger():
    for seconds in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10):
        seed("completed", duration=seconds, runner="builtin:echo")
    seed("failed", duration=20, runner="plugin:qa/x/flaky", reason="old reason", hours_ago=5)
    seed("failed", duration=30, runner="plugin:qa/x/flaky", reason="runner.error: boom")
    seed("timeout", duration=40, runner="plugin:qa/x/slow", reason="runner.timeout: late")
    seed("cancelled", duration=50)
    seed("running", hours_ago=0.2)
    seed("queued", hours_ago=0.1)
    seed("running", hours_ago=30)  # older than the window: active, not in the 24 h counts
    seed("failed", duration=99, hours_ago=30, runner="plugin:qa/x/ancient")

    summary = run_summary()

    assert summary["by_status"] == {"queued": 1, "running": 1, "completed": 10, "failed": 2,
                                    "cancelled": 1, "timeout": 1}
    assert summary["total"] == 16
    assert summary["active"] == 3
    # Finished in the window: 1..10, 20, 30, 40, 50 seconds.
    assert summary["durations_count"] == 14
    assert summary["p50_seconds"] == 7.0
    assert summary["p95_seconds"] == 50.0
    assert summary["top_failing"] == [
        {"runner_id": "plugin:qa/x/flaky", "failures": 2, "last_reason": "runner.error: boom",
         "last_status": "failed",
         "last_failed_at": NOW - timedelta(hours=1) + timedelta(seconds=30)},
        {"runner_id": "plugin:qa/x/slow", "failures": 1, "last_reason": "runner.timeout: late",
         "last_status": "timeout",
         "last_failed_at": NOW - timedelta(hours=1) + timedelta(seconds=40)},
    ]


def test_hourly_buckets_cover_whole_hours_and_add_up_to_the_totals():
    seed("completed", hours_ago=0.25)   # 12:15, the current hour
    seed("completed", hours_ago=1.0)    # 11:30
    seed("failed", hours_ago=1.25)      # 11:15
    seed("completed", hours_ago=23.4)   # 13:06 yesterday: the first bucket
    seed("completed", hours_ago=23.6)   # 12:54 yesterday: before the window

    summary = run_summary()
    hourly = summary["hourly"]

    assert len(hourly) == 24
    assert hourly[0]["start"] == datetime(2026, 3, 9, 13, 0, tzinfo=UTC)
    assert hourly[-1]["start"] == datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
    assert hourly[-1]["counts"]["completed"] == 1
    assert hourly[-2]["counts"] == {"queued": 0, "running": 0, "completed": 1, "failed": 1,
                                    "cancelled": 0, "timeout": 0}
    assert hourly[0]["total"] == 1
    assert sum(bucket["total"] for bucket in hourly) == summary["total"] == 4


def test_an_empty_ledger_gives_zeros_and_no_percentiles():
    summary = run_summary()
    assert summary["total"] == summary["active"] == 0
    assert summary["p50_seconds"] is None and summary["p95_seconds"] is None
    assert summary["top_failing"] == []


def seed_call(at, tokens=(100, 10), cost="0.001", status="ok"):
    call = ModelCall.objects.create(model_id="m", model_name="gpt", status=status,
                                    input_tokens=tokens[0], output_tokens=tokens[1],
                                    cost=Decimal(cost))
    ModelCall.objects.filter(pk=call.pk).update(created_at=at)


def test_model_calls_are_summed_per_day_over_seven_whole_days(django_assert_num_queries):
    seed_call(NOW - timedelta(hours=1))
    seed_call(NOW - timedelta(hours=2), tokens=(5, 0), cost="0.00000002", status="error")
    seed_call(datetime(2026, 3, 8, 23, 59, tzinfo=UTC), status="timeout")
    seed_call(datetime(2026, 3, 4, 0, 0, tzinfo=UTC))          # the first day's first moment
    seed_call(datetime(2026, 3, 3, 23, 59, tzinfo=UTC))        # before the window
    seed_call(datetime(2026, 3, 8, 10, 0, tzinfo=UTC), status="cancelled")  # not a failure

    rollups.rebuild()
    with django_assert_num_queries(1):
        summary = dashboard.model_call_days(now=NOW)

    daily = {row["day"]: row for row in summary["daily"]}
    assert list(daily) == [date(2026, 3, 4) + timedelta(days=i) for i in range(7)]
    assert daily[date(2026, 3, 10)] == {"day": date(2026, 3, 10), "calls": 2,
                                        "input_tokens": 105, "output_tokens": 10,
                                        "cost": Decimal("0.00100002"), "failures": 1}
    assert (daily[date(2026, 3, 8)]["calls"], daily[date(2026, 3, 8)]["failures"]) == (2, 1)
    assert daily[date(2026, 3, 4)]["calls"] == 1
    assert daily[date(2026, 3, 9)]["cost"] == 0
    assert (summary["calls"], summary["tokens"], summary["cost"], summary["failures"]) == \
        (5, 445, Decimal("0.00400002"), 2)


def test_runs_and_model_calls_written_through_the_ledger_are_counted_without_a_rebuild():
    for n, status in enumerate(("completed", "completed", "failed")):
        ledger.start_run.func(run={"run_id": f"r{n}", "event_id": f"e{n}",
                                   "runner_id": "plugin:qa/x/y"},
                              event_log={"event_id": f"e{n}", "idempotency_key": f"e{n}"},
                              user_transcript=None, owner_id="test", scope_keys={})
        ledger.finish_run.func(f"r{n}", status, "runner.error: boom" if n == 2 else "")
    model_calls.record_model_call.func(run_id="r0", model_id="m", model_name="gpt",
                                       status="ok", input_tokens=7, output_tokens=3,
                                       cost=Decimal("0.5"))

    summary = dashboard.run_summary()
    spend = dashboard.model_call_days()

    assert (summary["by_status"]["completed"], summary["by_status"]["failed"]) == (2, 1)
    assert summary["top_failing"][0]["last_reason"] == "runner.error: boom"
    assert (spend["calls"], spend["tokens"], spend["cost"]) == (1, 10, Decimal("0.5"))
    counted = (summary, spend)
    rollups.rebuild()
    assert (dashboard.run_summary(now=summary["now"]),
            dashboard.model_call_days(now=summary["now"])) == counted
