"""WebSocket routes of the runners app (Channels convention: `<app>/routing.py`)."""

from django.urls import re_path

from runners.ws.consumers import ConversationConsumer, RunStreamConsumer

websocket_urlpatterns = [
    re_path(r"^ws/runs/(?P<run_id>[0-9A-Za-z_.-]{1,64})/?$", RunStreamConsumer.as_asgi(),
            name="ws-run-stream"),
    re_path(r"^ws/conversations/(?P<conversation_id>[A-Za-z0-9._:-]{1,128})/?$",
            ConversationConsumer.as_asgi(), name="ws-conversation"),
]
