"""The in-run API's pages: newest first, one cursor on to the older ones, filters kept."""

import pytest

from ledger.models import AgentRun, EventLog
from ledger.selectors import runs as readers

pytestmark = [pytest.mark.django_db, pytest.mark.backend]


def test_event_pages_walk_back_from_the_newest_and_keep_the_type_filter():
    for n in range(5):
        EventLog.objects.create(event_id=f"e{n}", event_type="message.received",
                                conversation_id="c1")
    EventLog.objects.create(event_id="other", event_type="run.cancelled", conversation_id="c1")

    first = readers.event_page_sync("c1", "", event_types=["message.received"], limit=3)
    second = readers.event_page_sync("c1", "", event_types=["message.received"],
                                     before_cursor=first["next_cursor"], limit=3)

    assert [e["event_id"] for e in first["items"]] == ["e4", "e3", "e2"]
    assert (first["has_more"], first["total_count"]) == (True, 5)
    assert [e["event_id"] for e in second["items"]] == ["e1", "e0"]
    assert (second["has_more"], second["next_cursor"]) == (False, None)


def test_run_lists_walk_back_from_the_newest_run_of_the_runner_and_status():
    for n in range(4):
        AgentRun.objects.create(run_id=f"r{n}", event_id=f"e{n}", runner_id="builtin:echo",
                                conversation_id="c1", status="completed")
    AgentRun.objects.create(run_id="failed", event_id="ef", runner_id="builtin:echo",
                            conversation_id="c1", status="failed")
    AgentRun.objects.create(run_id="elsewhere", event_id="ex", runner_id="builtin:other",
                            conversation_id="c1", status="completed")

    first = readers.run_list_sync(runner_id="builtin:echo", conversation_id="c1", thread_id="",
                                  statuses=["completed"], limit=3)
    second = readers.run_list_sync(runner_id="builtin:echo", conversation_id="c1", thread_id="",
                                   statuses=["completed"], before_cursor=first["next_cursor"],
                                   limit=3)

    assert [r["run_id"] for r in first["items"]] == ["r3", "r2", "r1"]
    assert (first["has_more"], first["total_count"]) == (True, 4)
    assert [r["run_id"] for r in second["items"]] == ["r0"]
