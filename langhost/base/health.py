"""What every LangHost process needs to serve, checked: the database answers a query and a
message goes through the Channels layer and back. `/healthz` and a runtime worker's health
port answer from it."""

import asyncio

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import connection

# A part that has not answered within this long counts as down.
CHECK_SECONDS = 3.0


def _query_database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


async def _round_trip_channel_layer() -> None:
    layer = get_channel_layer()
    # The default prefix: channels-redis reads a process's channels of one prefix together, and
    # a receive on another prefix waits behind a long-running one (a worker's own channel).
    channel = await layer.new_channel()
    await layer.send(channel, {"type": "healthz"})
    await layer.receive(channel)


async def _state(check) -> str:
    try:
        await asyncio.wait_for(check(), CHECK_SECONDS)
    except Exception as exc:  # any failure means the part is down
        return f"down: {type(exc).__name__}"
    return "ok"


async def parts() -> dict[str, str]:
    """The state of what every LangHost process needs: `ok`, or `down: <why>`."""
    return {
        "database": await _state(sync_to_async(_query_database)),
        "channel_layer": await _state(_round_trip_channel_layer),
    }


def answer(states: dict) -> tuple[dict, int]:
    """The health answer's body and status: 200 when every part is ok, else 503."""
    healthy = all(state == "ok" for state in states.values())
    return {"status": "ok" if healthy else "unavailable", **states}, 200 if healthy else 503
