"""Model calls in the admin: on their run's page, in their own read-only list, on the
dashboard."""

import re
import uuid
from decimal import Decimal

import pytest
from django.test import Client

from ledger.models import AgentRun, ModelCall
from ledger.services.model_calls import record_model_call

pytestmark = [pytest.mark.django_db, pytest.mark.backend]


def make_run(status="completed"):
    return AgentRun.objects.create(run_id=str(uuid.uuid4()), event_id=str(uuid.uuid4()),
                                   runner_id="builtin:echo", status=status)


def make_call(run_id="", **fields):
    """A call recorded as a model call is (its rollups with it)."""
    record_model_call.func(**{
        "run_id": run_id, "model_id": "m-1", "model_name": "gpt-small", "provider_name": "acme",
        "status": "ok", "input_tokens": 1200, "output_tokens": 345, "cached_tokens": 200,
        "cost": Decimal("0.00123456"), "latency_ms": 812, "first_token_ms": 140, **fields})
    return ModelCall.objects.latest("pk")


@pytest.fixture
def admin_client(superuser):
    client = Client()
    client.force_login(superuser)
    return client


def cells(html: str, element_id: str) -> list[list[str]]:
    """The text of each body row's cells in the element with this id."""
    body = html[html.index(f'id="{element_id}"'):]
    body = body[body.index("<tbody>"):body.index("</tbody>")]
    return [[" ".join(re.sub(r"<[^>]+>", " ", cell).split())
             for cell in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)]
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)]


def test_the_run_page_lists_the_runs_model_calls(admin_client):
    run = make_run()
    make_call(run.run_id, status="error", error="HTTP 503 from acme", input_tokens=0,
              output_tokens=0, cached_tokens=0, cost=Decimal(0), first_token_ms=None)
    make_call(run.run_id, model_name="gpt-big", provider_name="other", attempt=2)
    make_call("another-run", model_name="not-this-run")

    html = admin_client.get(f"/admin/ledger/agentrun/{run.pk}/change/").content.decode()

    rows = [row[1:] for row in cells(html, "run-model-calls")]  # without the time
    assert rows == [
        ["gpt-small", "acme", "error", "0", "0", "0", "0.00000000", "812 ms", "—",
         "HTTP 503 from acme"],
        ["gpt-big", "other", "ok (attempt 2)", "1200", "345", "200", "0.00123456", "812 ms",
         "140 ms", ""],
    ]


def test_a_run_without_calls_says_so(admin_client):
    run = make_run(status="running")

    html = admin_client.get(f"/admin/ledger/agentrun/{run.pk}/change/").content.decode()

    assert "Model calls · 0" in html and "None yet (listed when the run ends)." in html


def test_the_model_call_list_links_each_call_to_its_run_page(admin_client):
    run = make_run()
    make_call(run.run_id)

    page = admin_client.get("/admin/ledger/modelcall/?status__exact=ok")

    assert page.status_code == 200
    assert f'<a href="/admin/runs/{run.run_id}/">{run.run_id}</a>' in page.content.decode()
    assert admin_client.get(f"/admin/runs/{run.run_id}/").url == \
        f"/admin/ledger/agentrun/{run.pk}/change/"


def test_model_calls_cannot_be_added_changed_or_deleted(admin_client):
    call = make_call()

    assert admin_client.get("/admin/ledger/modelcall/add/").status_code == 403
    assert admin_client.post(f"/admin/ledger/modelcall/{call.pk}/delete/").status_code == 403
    page = admin_client.get(f"/admin/ledger/modelcall/{call.pk}/change/").content.decode()
    assert 'name="_save"' not in page and 'class="deletelink"' not in page


def test_the_dashboard_shows_todays_tokens_and_cost(admin_client):
    make_call(input_tokens=1000, output_tokens=234, cost=Decimal("0.00250000"))
    make_call(input_tokens=10, output_tokens=0, cost=Decimal("0.00000100"), status="timeout")

    html = admin_client.get("/admin/").content.decode()

    # Days: oldest first, today last; columns: day, calls, input, output, cost, failed.
    days = cells(html, "dash-model-call-days")
    assert len(days) == 7
    assert days[-1][1:] == ["2", "1010", "234", "0.002501", "1"]
    assert all(day[1:] == ["0", "0", "0", "0.000000", "0"] for day in days[:-1])
    failures = re.search(r'id="dash-model-call-failures".*?tile-value">(\d+)<', html, re.S)
    assert failures.group(1) == "1"
