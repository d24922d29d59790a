"""`GET /healthz`: whether this web process can serve, for a process manager or load balancer.

200 when the database answers a query and a message goes through the Channels layer and back;
503 naming what did not. No sign-in, and nothing in the answer but each part's state, and
how plugins and the box are confined here (`confinement`: `unconfined` is said, not failed).
"""

from asgiref.sync import sync_to_async
from django.http import JsonResponse

from langhost.base import health
from runners import safety


async def healthz(request):
    body, status = health.answer(await health.parts())
    body["confinement"] = await sync_to_async(safety.report)()
    return JsonResponse(body, status=status)
