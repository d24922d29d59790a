"""Runs whose owner stopped renewing its lease are failed, with a reason saying so."""

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from ledger.models import AgentRun

pytestmark = pytest.mark.django_db


def running(run_id: str, lease_in_seconds: int) -> AgentRun:
    return AgentRun.objects.create(run_id=run_id, event_id=run_id, runner_id="builtin:echo",
                                   status="running", execution_owner_id="gone-host:1",
                                   lease_expires_at=timezone.now() + timedelta(seconds=lease_in_seconds))


def test_reap_runs_fails_runs_whose_lease_ran_out(capsys):
    running("stale", -5)

    call_command("reap_runs")

    stale = AgentRun.objects.get(run_id="stale")
    assert stale.status == "failed"
    assert "stopped renewing its lease" in stale.status_reason
    assert stale.finished_at is not None
    assert "1 stale run(s) reaped" in capsys.readouterr().out


def test_reap_runs_leaves_runs_with_a_live_lease_alone():
    running("alive", 60)

    call_command("reap_runs")

    assert AgentRun.objects.get(run_id="alive").status == "running"
