"""WebSocket routes, collected from the apps that serve them."""

from django.urls import re_path

from runners.consumers import RunStreamConsumer

websocket_urlpatterns = [
    re_path(r"^ws/runs/(?P<run_id>[0-9A-Za-z_.-]{1,64})/?$", RunStreamConsumer.as_asgi(),
            name="ws-run-stream"),
]
