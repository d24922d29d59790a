"""A schedule saved in the admin is checked as the API checks it, for the user saving it, and
its runs start as them from then on."""

import json

import pytest
from django.urls import reverse
from django.utils import timezone

from runners.schedules.models import Schedule

pytestmark = pytest.mark.django_db


@pytest.fixture
def alices(agent, user):
    return Schedule.objects.create(project=agent.project, name="Ping", cron="0 9 * * *",
                                   agent=agent, input={"text": "ping"}, created_by=user,
                                   next_run_at=timezone.now())


def save(client, schedule, **changes):
    form = {"name": schedule.name, "project": schedule.project_id, "cron": schedule.cron,
            "timezone": schedule.timezone, "agent": schedule.agent_id or "",
            "conversation_id": schedule.conversation_id, "runner_id": schedule.runner_id,
            "input": json.dumps(schedule.input), "enabled": "on",
            "missed_ticks": schedule.missed_ticks, **changes}
    return client.post(reverse("admin:schedules_schedule_change", args=[schedule.pk]), form)


def test_a_staff_member_cannot_aim_someone_elses_schedule_at_an_agent_they_may_not_use(
        client, make_staff, user, alices):
    client.force_login(make_staff("view_schedule", "change_schedule"))

    response = save(client, alices, input=json.dumps({"text": "theirs now"}))

    assert response.status_code == 200 and response.context["adminform"].form.errors["agent"]
    alices.refresh_from_db()
    assert (alices.input, alices.created_by) == ({"text": "ping"}, user)


def test_a_schedule_saved_in_the_admin_runs_as_its_editor(client, superuser, alices):
    client.force_login(superuser)

    response = save(client, alices, input=json.dumps({"text": "pong"}))

    assert response.status_code == 302
    alices.refresh_from_db()
    assert (alices.input, alices.created_by) == ({"text": "pong"}, superuser)
