"""Evaluating from the admin: the agent's page links the evaluate page; an uploaded eval set
runs in the background and its report lists every case and criterion; a bad file is refused
naming the field."""

import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from ledger.models import AgentRun, Conversation
from runners.evals.models import EvalReport
from tests.timing import scaled

pytestmark = pytest.mark.django_db(transaction=True)  # the evaluation runs on another thread

EVALSET = b"""
name: echoes
cases:
  - name: says-it-back
    turns:
      - user: hello there
        expect: {reply_exact: "echo: hello there", tool_calls: []}
  - name: expects-too-much
    turns:
      - user: hi
        expect: {reply_contains: goodbye}
"""


@pytest.fixture
def admin_client(superuser):
    client = Client()
    client.force_login(superuser)
    return client


@pytest.fixture
def echo_agent(make_agent_type, make_agent, project):
    return make_agent(project, make_agent_type(name="Echo", runner_id="builtin:echo"),
                      name="Parrot")


def test_an_uploaded_eval_set_runs_and_its_report_lists_each_criterion(admin_client, echo_agent,
                                                                        superuser):
    agent_page = admin_client.get(reverse("admin:runners_agentinstance_change",
                                          args=[echo_agent.pk])).content.decode()
    evaluate = reverse("admin:evals_evalreport_evaluate", args=[echo_agent.pk])

    answer = admin_client.post(evaluate, {"evalset": SimpleUploadedFile("echo.yaml", EVALSET)})
    deadline = time.monotonic() + scaled(30)
    while not EvalReport.objects.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    report = EvalReport.objects.get()
    page = admin_client.get(reverse("admin:evals_evalreport_change",
                                    args=[report.pk])).content.decode()

    assert evaluate in agent_page
    assert answer.status_code == 302
    assert (report.agent_id, report.evalset_name, report.passed, report.failed) == \
        (echo_agent.pk, "echoes", 1, 1)
    start = page.index('id="eval-criteria"')
    table = page[start:page.index("</table>", start)]
    assert "says-it-back</td><td>reply is exactly</td><td>PASS" in table
    assert "expects-too-much</td><td>reply contains &#x27;goodbye&#x27;</td><td>FAIL" in table
    # Its runs are the superuser's who asked, in conversations of theirs.
    assert set(AgentRun.objects.values_list("actor_type", "actor_id")) == {
        ("user", str(superuser.pk))}
    assert set(Conversation.objects.values_list("user_id", flat=True)) == {str(superuser.pk)}


def test_a_bad_eval_set_is_refused_naming_its_field(admin_client, echo_agent):
    evaluate = reverse("admin:evals_evalreport_evaluate", args=[echo_agent.pk])

    page = admin_client.post(evaluate, {"evalset": SimpleUploadedFile(
        "bad.yaml", b"name: x\ncases: []\n")})

    assert page.status_code == 200
    assert "cases: List should have at least 1 item" in page.content.decode()
    assert not EvalReport.objects.exists()
