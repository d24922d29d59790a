"""The admin's operator pages: dashboard on the index, playground, live run detail."""

import re
import uuid
from datetime import timedelta

import pytest
from channels.testing import HttpCommunicator
from django.test import Client
from django.utils import timezone

from ledger.models import AgentRun, AgentRunEvent, Transcript
from ledger.services import rollups
from runners.models import RunnerDescriptor
from tests.timing import scaled

pytestmark = pytest.mark.django_db

ECHO = "plugin:e2e/agent-runner-qa/default"


def seed(status, *, runner="builtin:echo", seconds=None, reason="", project=None, **fields):
    created = timezone.now() - timedelta(hours=1)
    run = AgentRun.objects.create(run_id=str(uuid.uuid4()), event_id=str(uuid.uuid4()),
                                  runner_id=runner, status=status, status_reason=reason,
                                  project_id=str(project.pk) if project else "", **fields)
    update = {"created_at": created}
    if seconds is not None:
        update.update(started_at=created, finished_at=created + timedelta(seconds=seconds))
    AgentRun.objects.filter(pk=run.pk).update(**update)
    run.refresh_from_db()
    return run


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def text_of(html: str, element_id: str) -> str:
    """The text inside the element with this id (tags stripped, spaces collapsed)."""
    match = re.search(rf'id="{element_id}".*?>(.*?)</div>\s*</div>', html, re.S)
    assert match, element_id
    return " ".join(re.sub(r"<[^>]+>", " ", match.group(1)).split())


def test_the_admin_index_shows_the_ledger_numbers(superuser):
    for seconds in (1, 2, 3, 4):
        seed("completed", seconds=seconds)
    seed("failed", runner="plugin:qa/x/flaky", seconds=10, reason="runner.error: boom")
    seed("running")
    RunnerDescriptor.objects.create(id="plugin:qa/x/gone", source="plugin", runner_name="gone",
                                    available=False)
    rollups.rebuild()  # the runs went straight into the ledger: counted once rebuilt

    html = signed_in(superuser).get("/admin/").content.decode()

    assert "LangHost at a glance" in html
    assert text_of(html, "dash-active").startswith("Active runs 1 ")
    assert text_of(html, "dash-total").startswith("Runs, last 24 h 6 1 failed")
    assert text_of(html, "dash-p50").startswith("p50 duration 3.00 s 5 finished runs")
    assert text_of(html, "dash-p95").startswith("p95 duration 10.00 s")
    available = RunnerDescriptor.objects.filter(available=True).count()
    assert text_of(html, "dash-runners").startswith(
        f"Runners available {available} of {available + 1} known")
    assert "Runtime link" in text_of(html, "dash-runtime")
    failing = html[html.index('id="dash-failing"'):]
    assert "plugin:qa/x/flaky" in failing and "runner.error: boom" in failing
    # The chart: one stacked segment per status in the hour the runs were made.
    segments = re.findall(r'data-status="(\w+)" data-count="(\d+)"', html)
    assert sorted(segments) == [("completed", "4"), ("failed", "1"), ("running", "1")]
    assert 'href="/admin/playground/"' in html
    assert "/static/langhost/css/langhost.css" in html
    assert "<script src=\"http" not in html and "<link rel=\"stylesheet\" href=\"http" not in html


def test_the_playground_lists_visible_agents_and_runners_for_superusers(
        superuser, user, make_user, make_project, make_agent_type, make_agent):
    echo_type = make_agent_type(name="Echo", slug="echo", runner_id=ECHO)
    mine = make_agent(make_project(user), echo_type, name="Mine")
    theirs = make_agent(make_project(make_user()), echo_type, name="Theirs")
    user.is_staff = True
    user.save()

    html = signed_in(superuser).get("/admin/playground/").content.decode()
    assert f'value="agent:{mine.pk}"' in html and f'value="agent:{theirs.pk}"' in html
    assert 'value="runner:builtin:echo"' in html
    assert "/static/langhost/js/playground.js" in html

    html = signed_in(user).get("/admin/playground/").content.decode()
    assert f'value="agent:{mine.pk}"' in html
    assert f'value="agent:{theirs.pk}"' not in html
    assert 'value="runner:' not in html


def test_the_run_detail_page_follows_the_run_live_and_offers_cancel(superuser):
    running = seed("running")
    page = signed_in(superuser).get(f"/admin/ledger/agentrun/{running.pk}/change/")
    html = page.content.decode()
    assert page.status_code == 200
    assert f'data-run-id="{running.run_id}"' in html
    assert f'data-cancel-url="/api/v1/runs/{running.run_id}/cancel"' in html
    assert 'id="run-cancel"' in html
    assert "/static/langhost/js/run_detail.js" in html


def test_an_ended_run_page_has_its_transcript_and_no_cancel(superuser):
    run = seed("completed", seconds=1, conversation_id="conv-1")
    AgentRunEvent.objects.create(run=run, sequence=1, type="run.completed", data_json={})
    Transcript.objects.create(conversation_id="conv-1", event_id=run.event_id, role="user",
                              content="hello there")
    Transcript.objects.create(conversation_id="conv-1", run_id=run.run_id, role="assistant",
                              author="Ada", content="echo: hello there")
    Transcript.objects.create(conversation_id="conv-1", run_id="another", role="assistant",
                              content="not this run")

    html = signed_in(superuser).get(f"/admin/ledger/agentrun/{run.pk}/change/").content.decode()

    transcript = html[html.index('id="run-transcript"'):]
    assert "hello there" in transcript and "echo: hello there" in transcript
    assert "not this run" not in transcript
    assert 'id="run-cancel"' not in html


def test_admin_runs_by_run_id_redirect_to_the_change_page(superuser):
    run = seed("completed")
    response = signed_in(superuser).get(f"/admin/runs/{run.run_id}/")
    assert response.status_code == 302
    assert response["Location"] == f"/admin/ledger/agentrun/{run.pk}/change/"
    assert signed_in(superuser).get("/admin/runs/nope/").status_code == 404


def test_pages_need_a_staff_sign_in(user):
    for path in ("/admin/", "/admin/playground/", "/admin/runs/x/"):
        assert Client().get(path).status_code == 302
        assert signed_in(user).get(path).status_code == 302  # not staff


@pytest.mark.processes  # langhost.asgi.application starts this process's runtime
async def test_the_asgi_app_serves_the_shipped_static_files():
    from langhost.asgi import application

    for path in ("/static/langhost/js/run_stream.js", "/static/admin/css/base.css"):
        communicator = HttpCommunicator(application, "GET", path)
        await communicator.send_input({"type": "http.request", "body": b""})
        start = await communicator.receive_output(timeout=scaled(5))
        assert (start["type"], start["status"]) == ("http.response.start", 200), path
        await communicator.wait(timeout=scaled(5))
