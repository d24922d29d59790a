"""Background work has one owner: `runners.work` starts every loop (reaper, knowledge
ingestion, webhook delivery, queued runs, schedules, pruning), stops them, and the runtime page
shows each one's state; a loop turned off by its setting is not started and says so."""

import asyncio

import pytest
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from ledger.models import AgentRun
from runners import work
from runners.knowledge import worker as knowledge_worker
from runners.schedules.models import Schedule
from runners.webhooks import worker as webhook_worker
from tests.timing import scaled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_work_yet")]

ALL_ON = {"LANGHOST_REAP_STALE_RUNS": True, "LANGHOST_KNOWLEDGE_INGESTION": True,
          "LANGHOST_WEBHOOK_DELIVERY": True, "LANGHOST_BACKGROUND_WORK": True}


@pytest.fixture
async def no_work_yet():
    """This process's work as a fresh process has it (a socket test's ASGI app may have
    started it, with every loop off)."""
    await work.stop()
    yield
    await work.stop()


def states() -> dict[str, str]:
    return {loop["name"]: loop["state"] for loop in work.status()}


async def until(condition, what: str):
    for _ in range(int(scaled(200))):
        if await condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{what} did not happen")


@override_settings(**ALL_ON)
async def test_started_work_runs_every_loop_and_fires_a_due_schedule(agent, user):
    schedule = await Schedule.objects.acreate(
        project_id=agent.project_id, name="Ping", cron="* * * * *", agent=agent,
        input={"text": "ping"}, created_by=user, next_run_at=timezone.now())
    work.start()
    try:
        assert set(states().values()) == {"running"}
        assert set(states()) == {"reaper", "knowledge ingestion", "webhook delivery",
                                 "queued runs and schedules", "ledger pruning"}

        async def fired():
            return await AgentRun.objects.filter(
                event_id__startswith=schedule.event_prefix).aexists()
        await until(fired, "the due schedule's run")
    finally:
        await work.stop()

    assert set(states().values()) == {"not started"}


@override_settings(**{**ALL_ON, "LANGHOST_WEBHOOK_DELIVERY": False})
async def test_a_loop_turned_off_is_not_started_and_says_which_setting():
    work.start()
    try:
        assert states()["webhook delivery"] == "off (LANGHOST_WEBHOOK_DELIVERY)"
        assert states()["reaper"] == "running"
    finally:
        await work.stop()


def test_the_runtime_page_shows_each_loop_and_its_state(admin_client):
    html = admin_client.get(reverse("admin-runtime-status")).content.decode()

    assert 'id="background-work"' in html
    for loop in work.LOOPS:  # the test settings turn every loop off
        assert f"<td>{loop.name}</td>" in html
        assert f"off ({loop.setting})" in html


@override_settings(**ALL_ON, LANGHOST_RUNTIME_WORKER=True)
async def test_a_web_process_beside_runtime_workers_leaves_the_work_to_them():
    work.start_in_serving_process()

    assert set(states().values()) == {"running elsewhere"}


def test_a_delivery_or_document_queued_after_the_work_stopped_is_left_for_the_next_start():
    async def start_and_stop():
        with override_settings(**ALL_ON):
            work.start()
            await asyncio.sleep(0)  # each loop begins
            await work.stop()

    asyncio.run(start_and_stop())  # that loop is closed now, as a stopped process's is

    webhook_worker.wake()  # what a request that queued one does: no error
    knowledge_worker.wake()
