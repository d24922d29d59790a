"""Cancelling runs from the admin's run list is a superuser's: the list shows every run to
whoever may view runs."""

import uuid

import pytest
from django.urls import reverse

from ledger.models import AgentRun

pytestmark = [pytest.mark.django_db, pytest.mark.backend]

CHANGELIST = reverse("admin:ledger_agentrun_changelist")


@pytest.fixture
def running():
    return AgentRun.objects.create(run_id=str(uuid.uuid4()), event_id=str(uuid.uuid4()),
                                   runner_id="builtin:echo", status="running")


def cancel(client, run):
    return client.post(CHANGELIST, {"action": "cancel_runs", "_selected_action": [run.pk]},
                       follow=True)


def test_a_superuser_cancels_a_running_run(client, superuser, running):
    client.force_login(superuser)

    cancel(client, running)

    running.refresh_from_db()
    assert running.cancel_requested_at is not None


def test_a_staff_member_who_may_view_runs_is_not_offered_their_cancel(client, running,
                                                                      make_staff):
    client.force_login(make_staff("view_agentrun"))

    page = client.get(CHANGELIST)
    cancel(client, running)

    assert page.status_code == 200 and "cancel_runs" not in page.content.decode()
    running.refresh_from_db()
    assert running.cancel_requested_at is None
