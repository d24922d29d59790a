"""`GET /healthz`: whether this web process can serve, for a process manager or load balancer.

200 when the database answers a query and a message goes through the Channels layer and back;
503 naming what did not. No sign-in, and nothing in the answer but each part's state.
"""

import asyncio

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import connection
from django.http import JsonResponse

# A part that has not answered within this long counts as down.
CHECK_SECONDS = 3.0


def _query_database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


async def _round_trip_channel_layer() -> None:
    layer = get_channel_layer()
    channel = await layer.new_channel("healthz.")
    await layer.send(channel, {"type": "healthz"})
    await layer.receive(channel)


async def _state(check) -> str:
    try:
        await asyncio.wait_for(check(), CHECK_SECONDS)
    except Exception as exc:  # any failure means the part is down
        return f"down: {type(exc).__name__}"
    return "ok"


async def healthz(request):
    parts = {
        "database": await _state(sync_to_async(_query_database)),
        "channel_layer": await _state(_round_trip_channel_layer),
    }
    healthy = all(state == "ok" for state in parts.values())
    return JsonResponse({"status": "ok" if healthy else "unavailable", **parts},
                        status=200 if healthy else 503)
