"""ASGI entry point: HTTP through Django, WebSockets through Channels.

Static files (the admin's CSS and JavaScript, and LangHost's own) are served by Django's
staticfiles handler, so a plain `daphne langhost.asgi:application` shows a complete admin
with no web server in front and nothing loaded from elsewhere.
"""

import os

from django.core.asgi import get_asgi_application

from langhost import data_dir

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "langhost.settings")
data_dir.prepare()
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from accounts.channels_auth import TokenAuthMiddlewareStack  # noqa: E402
from runners.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": ASGIStaticFilesHandler(django_asgi_app),
        "websocket": TokenAuthMiddlewareStack(URLRouter(websocket_urlpatterns)),
    }
)
