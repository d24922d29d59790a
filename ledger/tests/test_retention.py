"""Retention: `prune_ledger` removes ended runs older than the limit with what goes with them,
archives them first when asked, keeps newer conversations and the rollups, and gives SQLite's
pages back."""

import gzip
import io
import json
import os
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from ledger.models import AgentRun, AgentRunEvent, AgentTotals, Conversation, ModelCall, Transcript
from ledger.services import conversations, runs
from ledger.services.artifacts import artifacts
from ledger.services.model_calls import record_model_call

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.backend]

PAYLOAD = "x" * 2000  # enough per event that removing them frees pages


def run_in(conversation, n: int, days_ago: float, agent_id="agent-1") -> str:
    run_id = f"{conversation.conversation_id}-run-{n}"
    AgentRun.objects.create(run_id=run_id, event_id=f"{run_id}-event", runner_id="builtin:echo",
                            agent_id=agent_id, conversation_id=conversation.conversation_id,
                            status="running")
    AgentRunEvent.objects.bulk_create([AgentRunEvent(run_id=run_id, sequence=i, type="x",
                                                     data_json={"text": PAYLOAD})
                                       for i in range(1, 11)])
    Transcript.objects.create(conversation_id=conversation.conversation_id, role="user",
                              event_id=f"{run_id}-event", content="hello")
    Transcript.objects.create(conversation_id=conversation.conversation_id, role="assistant",
                              run_id=run_id, content="hi")
    async_to_sync(record_model_call)(run_id=run_id, agent_id=agent_id, model_id="m",
                                     model_name="m", status="ok", input_tokens=3,
                                     output_tokens=4)
    async_to_sync(runs.finish_run)(run_id, "completed")
    moment = timezone.now() - timedelta(days=days_ago)
    AgentRun.objects.filter(run_id=run_id).update(created_at=moment)
    Conversation.objects.filter(pk=conversation.pk).update(updated_at=moment)
    return run_id


@pytest.fixture
def ledger_of_two_conversations():
    """An old conversation (all its runs 30 days old, with a file) and a live one (an old
    run and a new one, with a file)."""
    old = conversations.create(project_id="p", agent_id="agent-1", user_id="u")
    live = conversations.create(project_id="p", agent_id="agent-1", user_id="u")
    old_runs = [run_in(old, n, days_ago=30) for n in range(40)]
    live_old = run_in(live, 0, days_ago=30)
    live_new = run_in(live, 1, days_ago=1)
    for conversation in (old, live):
        artifacts.save("p", "u", conversation.conversation_id, "notes.txt", text="kept?")
    return old, live, [*old_runs, live_old], live_new


def test_pruning_removes_old_runs_with_their_rows_and_keeps_the_rest(
        ledger_of_two_conversations, tmp_path):
    old, live, removed, kept = ledger_of_two_conversations
    totals = list(AgentTotals.objects.values("agent_id", "completed_runs", "input_tokens"))
    archive = tmp_path / "pruned.jsonl.gz"
    out = io.StringIO()

    call_command("prune_ledger", "--before", str(timezone.now() - timedelta(days=7)),
                 "--archive", str(archive), stdout=out)

    assert list(AgentRun.objects.values_list("run_id", flat=True)) == [kept]
    assert not AgentRunEvent.objects.filter(run_id__in=removed).exists()
    assert not ModelCall.objects.filter(run_id__in=removed).exists()
    assert not Transcript.objects.filter(event_id__in=[f"{r}-event" for r in removed]).exists()
    assert Transcript.objects.filter(run_id=kept).exists()
    assert not Conversation.objects.filter(pk=old.pk).exists()  # nothing newer: gone
    assert Conversation.objects.filter(pk=live.pk).exists()
    assert artifacts.list_names("p", "u", old.conversation_id) == []
    assert artifacts.list_names("p", "u", live.conversation_id) == ["notes.txt"]
    assert list(AgentTotals.objects.values("agent_id", "completed_runs",
                                           "input_tokens")) == totals  # metrics unchanged
    with gzip.open(archive, "rt") as lines:
        archived = [json.loads(line) for line in lines]
    assert sorted(item["run"]["run_id"] for item in archived) == sorted(removed)
    assert all(len(item["events"]) == 10 and item["model_calls"] for item in archived)
    assert "removed 41 run(s)" in out.getvalue()


def checkpointed_size(path: str) -> int:
    """The database file's size once the write-ahead log is written into it."""
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return os.path.getsize(path)


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's file; PostgreSQL "
                    "reuses freed pages through autovacuum")
def test_pruning_gives_sqlites_pages_back(ledger_of_two_conversations):
    path = connection.settings_dict["NAME"]
    before = checkpointed_size(path)

    out = io.StringIO()
    call_command("prune_ledger", "--before", str(timezone.now() - timedelta(days=7)),
                 stdout=out)

    assert "incremental vacuum" in out.getvalue()
    assert checkpointed_size(path) < before - 500_000  # the 410 events freed about 0.8 MB


def test_without_a_limit_pruning_is_refused(settings):
    settings.LANGHOST_LEDGER_RETENTION_DAYS = 0

    with pytest.raises(CommandError, match="Retention is off"):
        call_command("prune_ledger")
