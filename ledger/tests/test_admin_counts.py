"""Ledger changelists page through their tables without counting all of them."""

import uuid

import pytest
from django.db import connection
from django.db.models import Max
from django.test import Client
from django.test.utils import CaptureQueriesContext

from ledger.admin import LargeTablePaginator
from ledger.models import AgentRun

pytestmark = [pytest.mark.django_db, pytest.mark.backend]


def seed_runs(count: int, status="completed") -> None:
    for _ in range(count):
        AgentRun.objects.create(run_id=str(uuid.uuid4()), event_id=str(uuid.uuid4()),
                                runner_id="builtin:echo", status=status)


def unbounded_counts(queries) -> list[str]:
    return [q["sql"] for q in queries
            if "COUNT(" in q["sql"].upper() and "LIMIT" not in q["sql"].upper()]


def test_a_large_unfiltered_table_is_estimated_from_its_highest_id(monkeypatch):
    monkeypatch.setattr(LargeTablePaginator, "CAP", 3)
    seed_runs(5)

    with CaptureQueriesContext(connection) as queries:
        count = LargeTablePaginator(AgentRun.objects.order_by("-pk"), 2).count

    assert count == AgentRun.objects.aggregate(highest=Max("pk"))["highest"]
    assert unbounded_counts(queries) == []


def test_filtered_rows_are_counted_exactly_up_to_the_cap(monkeypatch):
    monkeypatch.setattr(LargeTablePaginator, "CAP", 3)
    seed_runs(5)
    seed_runs(2, status="failed")

    def count(status):
        return LargeTablePaginator(AgentRun.objects.filter(status=status), 2).count

    with CaptureQueriesContext(connection) as queries:
        assert (count("completed"), count("failed")) == (3, 2)
    assert unbounded_counts(queries) == []


def test_a_small_table_is_counted_exactly():
    seed_runs(2)

    assert LargeTablePaginator(AgentRun.objects.all(), 10).count == 2


def test_the_runs_changelist_never_counts_the_whole_table(superuser):
    seed_runs(3)
    client = Client()
    client.force_login(superuser)

    with CaptureQueriesContext(connection) as queries:
        page = client.get("/admin/ledger/agentrun/")
        filtered = client.get("/admin/ledger/agentrun/?status__exact=completed")

    assert (page.status_code, filtered.status_code) == (200, 200)
    assert "3 agent runs" in page.content.decode()
    assert [sql for sql in unbounded_counts(queries) if "agent_run" in sql] == []
