"""What is read on every run, tick or list page is read through an index, on SQLite and on
PostgreSQL: no plan of these queries scans `agent_run` or `agent_run_event` whole, so they
cost the same however large the ledger grows."""

import pytest
from django.db import connection
from django.utils import timezone

from ledger.models import AgentRun, AgentRunEvent, RunStatus
from runners.conversations import selectors

pytestmark = [pytest.mark.django_db, pytest.mark.backend]


def plan(queryset) -> str:
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # The planner may prefer a scan of a small table: asked not to, it shows whether
            # an index can serve the query at all.
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute(f"EXPLAIN {sql}", params)
        else:
            cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        return "\n".join(str(row[-1] if connection.vendor == "sqlite" else row[0])
                         for row in cursor.fetchall())


def scans_whole(text: str, table: str) -> bool:
    if connection.vendor == "postgresql":
        return f"Seq Scan on {table}" in text
    return any(line.strip().startswith(f"SCAN {table}") and "INDEX" not in line
               for line in text.splitlines())


def hot_queries(user, project) -> dict:
    now = timezone.now()
    active = AgentRun.objects.active()
    return {
        "the door's busy check": active.filter(agent_id="a").order_by(),
        "a conversation's active runs": active.filter(conversation_id="c").order_by("id"),
        "the reaper's expired leases": active.filter(status=RunStatus.RUNNING,
                                                     lease_expires_at__lt=now).order_by(),
        "the reaper's owners": active.filter(status=RunStatus.RUNNING).order_by().filter(
            execution_owner_id__startswith="h:").values("execution_owner_id").distinct(),
        "queued runs": active.filter(status=RunStatus.QUEUED).order_by("id"),
        **{f"runs list, set {n}": runs.filter(pk__lt=10**9).order_by("-pk")[:21]
           for n, runs in enumerate(selectors.visible_run_sets(user))},
        "a run by id": AgentRun.objects.filter(run_id="r"),
        "a run's events": AgentRunEvent.objects.filter(run_id="r", sequence__gt=0)
        .order_by("sequence")[:100],
    }


@pytest.mark.parametrize("name", [
    "the door's busy check", "a conversation's active runs", "the reaper's expired leases",
    "the reaper's owners", "queued runs", "runs list, set 0", "runs list, set 1", "a run by id",
    "a run's events"])
def test_no_hot_query_scans_the_ledger(user, project, name):
    query = hot_queries(user, project)[name]

    text = plan(query)

    assert not scans_whole(text, "agent_run"), text
    assert not scans_whole(text, "agent_run_event"), text
