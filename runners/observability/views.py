"""`GET /metrics`: this process's Prometheus metrics (`runners.observability.metrics`).

Open to whoever holds `LANGHOST_METRICS_TOKEN` (`Authorization: Bearer <token>`); without the
setting, to this machine only (a loopback address no proxy forwarded).
"""

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpResponse, JsonResponse

from accounts.first_admin import from_this_machine
from runners.observability import metrics
from runners.plugins.gateway import get_gateway


async def metrics_view(request):
    if not metrics.may_read(request.META.get("HTTP_AUTHORIZATION", ""),
                            local=from_this_machine(request)):
        return JsonResponse({"detail": "Metrics need the bearer token set in "
                                       "LANGHOST_METRICS_TOKEN (or a request from this "
                                       "machine when it is unset)."}, status=403)
    active, runners = await sync_to_async(metrics.read_ledger)()
    # A web process of the multi-process layout has no runtime link: its workers report it.
    link = None if settings.LANGHOST_RUNTIME_WORKER else await get_gateway().status()
    metrics.refresh(active, link, runners)
    return HttpResponse(metrics.exposition(), content_type=metrics.CONTENT_TYPE)
