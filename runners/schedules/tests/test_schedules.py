"""Schedules: a run at each tick, once however many processes look; missed ticks skipped or
run once; REST for the project's members with its last runs; bad cron or time zone a 400
naming the field."""

import asyncio
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from ledger.models import AgentRun
from runners.schedules import services
from runners.schedules.models import Schedule
from tests.timing import scaled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.backend]


def schedules_url(project) -> str:
    return f"/api/v1/projects/{project.pk}/schedules"


@pytest.fixture
def every_minute(agent, user):
    """A schedule due now: a message to the echo agent every minute."""
    return Schedule.objects.create(
        project=agent.project, name="Ping", cron="* * * * *", agent=agent,
        input={"text": "ping"}, created_by=user, next_run_at=timezone.now())


async def until_ended(run_ids: list[str]) -> list[AgentRun]:
    for _ in range(int(scaled(200))):
        runs = [run async for run in AgentRun.objects.filter(run_id__in=run_ids)]
        if len(runs) == len(run_ids) and all(run.is_terminal for run in runs):
            return runs
        await asyncio.sleep(0.05)
    raise AssertionError(f"runs {run_ids} did not end")


async def test_a_due_tick_starts_one_run_of_its_agent_as_its_creator(every_minute, user):
    started = await services.fire_due()

    (run,) = await until_ended(started)
    assert run.status == "completed"
    assert (run.agent_id, run.actor_id) == (str(every_minute.agent_id), str(user.pk))
    assert run.event_id.startswith(every_minute.event_prefix)
    schedule = await Schedule.objects.aget(pk=every_minute.pk)
    assert schedule.last_run_id == run.run_id
    assert schedule.next_run_at > timezone.now()
    assert schedule.next_run_at.second == 0  # the next minute's tick
    assert await services.fire_due() == []  # not due again before then


async def test_processes_firing_at_once_start_the_tick_once(every_minute):
    fired = await asyncio.gather(*(services.fire_due() for _ in range(4)))

    assert sum(len(started) for started in fired) == 1
    assert await AgentRun.objects.acount() == 1


async def test_missed_ticks_are_skipped_or_run_once_as_the_schedule_says(every_minute):
    long_ago = timezone.now() - timedelta(hours=3)
    await Schedule.objects.filter(pk=every_minute.pk).aupdate(next_run_at=long_ago)
    assert await services.fire_due() == []  # skipped (the default)
    assert (await Schedule.objects.aget(pk=every_minute.pk)).next_run_at > timezone.now()

    await Schedule.objects.filter(pk=every_minute.pk).aupdate(next_run_at=long_ago,
                                                              missed_ticks="run_once")
    started = await services.fire_due()

    assert len(started) == 1  # once for the 180 ticks missed
    await until_ended(started)


async def test_a_tick_the_door_refuses_records_why(every_minute, agent):
    agent.status = "paused"
    await agent.asave()

    assert await services.fire_due() == []

    schedule = await Schedule.objects.aget(pk=every_minute.pk)
    assert "paused" in schedule.last_error
    assert await AgentRun.objects.acount() == 0


def test_members_create_a_schedule_and_see_its_next_tick_and_last_runs(
        user_client, agent, every_minute):
    created = user_client.post(schedules_url(agent.project), {
        "name": "Mornings", "cron": "0 9 * * 1-5", "timezone": "Europe/Paris",
        "agent_id": str(agent.pk), "input": {"text": "good morning"}}, format="json")

    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["next_run_at"] is not None and body["last_runs"] == []
    listed = user_client.get(schedules_url(agent.project)).json()["data"]
    assert {item["name"] for item in listed} == {"Ping", "Mornings"}
    paused = user_client.patch(f"{schedules_url(agent.project)}/{body['id']}",
                               {"enabled": False}, format="json").json()
    assert paused["next_run_at"] is None


def test_bad_cron_time_zone_or_target_is_a_400_naming_the_field(user_client, agent):
    url = schedules_url(agent.project)
    base = {"name": "x", "cron": "* * * * *", "agent_id": str(agent.pk)}

    for change, field in (({"cron": "every day"}, "cron"),
                          ({"timezone": "Mars/Olympus"}, "timezone"),
                          ({"timezone": "America"}, "timezone"),  # a folder of zones
                          ({"agent_id": None}, "agent_id"),
                          ({"runner_id": "builtin:echo", "agent_id": None}, "runner_id"),
                          ({"conversation_id": "someone-elses"}, "conversation_id")):
        response = user_client.post(url, {**base, **change}, format="json")
        assert response.status_code == 400, (change, response.json())
        assert field in response.json()["errors"], (change, response.json())
    assert not Schedule.objects.exists()


def test_another_projects_schedules_are_not_found(outsider_client, agent, every_minute):
    assert outsider_client.get(schedules_url(agent.project)).status_code == 404


async def test_fired_runs_are_listed_as_the_schedules_last_runs(every_minute, user_client):
    started = await services.fire_due()
    await until_ended(started)

    body = await sync_to_async(lambda: user_client.get(
        f"{schedules_url(every_minute.project)}/{every_minute.pk}").json())()

    assert [run["run_id"] for run in body["last_runs"]] == started


def test_a_member_neither_sees_nor_changes_another_members_schedule(
        member_client, user_client, every_minute, agent):
    url = f"{schedules_url(agent.project)}/{every_minute.pk}"

    assert member_client.get(schedules_url(agent.project)).json()["data"] == []
    assert member_client.patch(url, {"input": {"text": "as Alice"}},
                               format="json").status_code == 404
    assert user_client.get(url).status_code == 200  # its creator, the project's owner


def test_an_input_that_is_not_a_message_is_a_400_naming_it(user_client, agent):
    for given in ("text", {"text": 5}, {"attachments": "x"}):
        response = user_client.post(schedules_url(agent.project), {
            "name": "x", "cron": "* * * * *", "agent_id": str(agent.pk), "input": given},
            format="json")
        assert response.status_code == 400, (given, response.content)
        assert "input" in response.json()["errors"]
