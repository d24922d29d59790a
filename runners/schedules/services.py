"""Schedules fire: each due tick is claimed once, whichever processes look (a compare-and-swap
of its `next_run_at`; the tick's event id is the ledger's idempotency key besides), and its
run starts through the one door as the schedule's creator, in the background.

A tick found later than LANGHOST_SCHEDULE_GRACE_SECONDS (LangHost was down) follows the
schedule's `missed_ticks`: skipped, or run once for all the ticks missed.
"""

import logging
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from asgiref.sync import sync_to_async
from croniter import croniter
from django.conf import settings
from django.utils import timezone

from runners.conversations import background
from runners.conversations import services as door
from runners.conversations.callers import Caller
from runners.conversations.exceptions import Refused
from runners.protocol import RunRefused
from runners.schedules.models import MissedTicks, Schedule

logger = logging.getLogger(__name__)


class ScheduleError(ValueError):
    """A cron expression or time zone LangHost cannot follow; `field` names which."""

    def __init__(self, detail: str, field: str):
        super().__init__(detail)
        self.field = field


def check_target(user, project_id, *, agent_id=None, runner_id: str = "",
                 conversation_id: str = "") -> None:
    """Whether `user` may schedule runs of this target in the project: the door decides, as
    for a run started now (the schedule's runs start as the user who saved it).
    ScheduleError naming the field if not."""
    if bool(agent_id) == bool(runner_id):
        raise ScheduleError("Give exactly one of agent_id or runner_id.", "agent_id")
    caller = Caller(user)
    if runner_id and not caller.is_superuser:
        raise ScheduleError("Only superusers may schedule a runner directly.", "runner_id")
    if agent_id:
        try:
            agent = door.find_agent(caller, agent_id, project_id)
            if conversation_id:
                door.find_conversation(caller, agent, conversation_id)
        except Refused as exc:
            raise ScheduleError(exc.detail, exc.field or "agent_id") from None


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a folder, e.g. "America"
        raise ScheduleError(f"'{name}' is not a known time zone.", "timezone") from None


def next_tick(cron: str, timezone_name: str, after: datetime) -> datetime:
    """The first tick of `cron` in the time zone strictly after `after`."""
    if not croniter.is_valid(cron) or len(cron.split()) not in (5, 6):
        raise ScheduleError(f"'{cron}' is not a cron expression of five fields (or six, "
                            "seconds last).", "cron")
    return croniter(cron, after.astimezone(zone(timezone_name))).get_next(datetime)


def save(schedule: Schedule) -> Schedule:
    """Store the schedule with its next tick (none while disabled)."""
    schedule.next_run_at = (next_tick(schedule.cron, schedule.timezone, timezone.now())
                            if schedule.enabled else None)
    schedule.save()
    return schedule


def _claim(schedule: Schedule, now: datetime) -> bool:
    """Move the schedule past its due tick, unless another process did first."""
    following = next_tick(schedule.cron, schedule.timezone, max(now, schedule.next_run_at))
    return bool(Schedule.objects.filter(
        pk=schedule.pk, enabled=True, next_run_at=schedule.next_run_at).update(
        next_run_at=following, updated_at=now))


def _due(now: datetime) -> list[Schedule]:
    return list(Schedule.objects.filter(enabled=True, next_run_at__lte=now)
                .select_related("created_by").order_by("next_run_at")[:100])


async def _prepare(schedule: Schedule, tick: datetime) -> door.PreparedRun:
    caller = Caller(schedule.created_by)
    event_id = f"{schedule.event_prefix}{int(tick.timestamp())}"
    if schedule.runner_id:
        return await door.prepare_runner_run(
            caller, runner_id=schedule.runner_id, event_input=schedule.input, event_id=event_id,
            source="schedule")
    return await sync_to_async(door.prepare_agent_run)(
        caller, agent_id=schedule.agent_id, project_id=schedule.project_id,
        conversation_id=schedule.conversation_id or None, event_input=schedule.input,
        event_id=event_id, source="schedule")


def _record(pk, **fields) -> None:
    Schedule.objects.filter(pk=pk).update(**fields)


async def fire_due(now: datetime | None = None) -> list[str]:
    """Start the run of each due tick this process claims; the ids of the runs started."""
    now = now or timezone.now()
    grace = timedelta(seconds=settings.LANGHOST_SCHEDULE_GRACE_SECONDS)
    started = []
    for schedule in await sync_to_async(_due)(now):
        tick = schedule.next_run_at
        if not await sync_to_async(_claim)(schedule, now):
            continue  # another process took this tick
        if now - tick > grace and schedule.missed_ticks == MissedTicks.SKIP:
            logger.info("schedule %s: tick %s missed, skipped", schedule.pk, tick.isoformat())
            continue
        try:
            prepared = await _prepare(schedule, tick)
            run = await background.start_in_background(prepared)
        except Exception as exc:  # a refusal, or input the door could not take: kept
            if not isinstance(exc, Refused | RunRefused):
                logger.exception("schedule %s: its tick started no run", schedule.pk)
            await sync_to_async(_record)(schedule.pk, last_run_at=now,
                                         last_error=getattr(exc, "detail", str(exc))[:2000])
            continue
        await sync_to_async(_record)(schedule.pk, last_run_at=now, last_run_id=run["run_id"],
                                     last_error="")
        started.append(run["run_id"])
    return started
