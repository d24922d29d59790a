"""Runs whose owner is gone are ended with a reason saying so: at once when their process of
this host no longer runs, else once their lease ran out."""

import subprocess
import sys
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from ledger.models import AgentRun
from ledger.owners import HOST, new_owner_id, owner_is_gone
from ledger.services.leases import reap_stale_runs_sync, request_cancel_sync

pytestmark = [pytest.mark.django_db, pytest.mark.backend]


def running(run_id: str, lease_in_seconds: int, owner: str = "other-host:1:2:x") -> AgentRun:
    return AgentRun.objects.create(run_id=run_id, event_id=run_id, runner_id="builtin:echo",
                                   status="running", execution_owner_id=owner,
                                   lease_expires_at=timezone.now() + timedelta(seconds=lease_in_seconds))


@pytest.fixture(scope="module")
def dead_owner() -> str:
    """The owner id a process of this host had, that process having exited since."""
    process = subprocess.Popen([sys.executable, "-c",
                                "from ledger.owners import new_owner_id; print(new_owner_id())"],
                               stdout=subprocess.PIPE, text=True)
    return process.communicate()[0].strip()


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


@pytest.mark.processes  # a process that has ended, for its pid
def test_runs_of_a_process_of_this_host_that_is_gone_fail_at_once(dead_owner):
    running("orphan", 60, dead_owner)
    running("mine", 60, new_owner_id())

    reap_stale_runs_sync()

    orphan = AgentRun.objects.get(run_id="orphan")
    assert orphan.status == "failed" and orphan.status_reason.startswith("host.gone:")
    assert AgentRun.objects.get(run_id="mine").status == "running"


def test_a_pid_given_to_another_process_does_not_pass_for_the_owner():
    pid, start, tag = new_owner_id().rsplit(":", 3)[1:]
    assert not owner_is_gone(f"{HOST}:{pid}:{start}:{tag}")
    assert owner_is_gone(f"{HOST}:{pid}:{int(start) + 1}:{tag}")
    assert not owner_is_gone(f"another-host:{pid}:{int(start) + 1}:{tag}")  # its lease decides


@pytest.mark.processes  # a process that has ended, for its pid
def test_cancelling_a_run_whose_owner_is_gone_ends_it(dead_owner):
    running("orphan", 60, dead_owner)
    running("elsewhere", 60)

    request_cancel_sync("orphan", "cancelled by test")
    request_cancel_sync("elsewhere", "cancelled by test")

    orphan = AgentRun.objects.get(run_id="orphan")
    assert orphan.status == "cancelled" and "cancelled by test" in orphan.status_reason
    assert AgentRun.objects.get(run_id="elsewhere").status == "running"  # its owner stops it
