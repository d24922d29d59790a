"""What a WebSocket to a path no route matches gets: accepted, then closed with 4404 (as a
known route closes for a missing object), rather than a server error."""

from channels.generic.websocket import AsyncWebsocketConsumer
from django.urls import re_path


class NoSuchRoute(AsyncWebsocketConsumer):
    async def connect(self):
        await self.accept()
        await self.close(code=4404)


def with_fallback(patterns: list) -> list:
    return [*patterns, re_path(r"", NoSuchRoute.as_asgi(), name="ws-no-route")]
