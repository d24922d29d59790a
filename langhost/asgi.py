"""ASGI entry point: HTTP through Django, WebSockets through Channels.

Django's handler reuses its request threads (langhost/handlers.py). Static files (the admin's CSS and JavaScript, and LangHost's own) are served by Django's
staticfiles handler, so a plain `daphne langhost.asgi:application` shows a complete admin
with no web server in front and nothing loaded from elsewhere.
"""

import os

import django

from langhost.base import data_dir
from langhost.base.process_secrets import take_secrets

take_secrets()  # before anything else can read or pass them on
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "langhost.settings")
data_dir.prepare()
django.setup(set_prefix=False)  # as django.core.asgi.get_asgi_application() does

from langhost.handlers import ASGIHandler  # noqa: E402

django_asgi_app = ASGIHandler()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from accounts.channels_auth import TokenAuthMiddlewareStack  # noqa: E402
from langhost.websockets import with_fallback  # noqa: E402
from runners import work  # noqa: E402
from runners.observability import tracing  # noqa: E402
from runners.plugins.gateway import start_in_background  # noqa: E402
from runners.routing import websocket_urlpatterns  # noqa: E402

tracing.setup()
router = ProtocolTypeRouter(
    {
        "http": tracing.asgi(ASGIStaticFilesHandler(django_asgi_app)),
        "websocket": TokenAuthMiddlewareStack(URLRouter(with_fallback(websocket_urlpatterns))),
    }
)


async def application(scope, receive, send):
    # Daphne has no start-up hook for applications: the first connection starts the runtime
    # and the background work (`manage.py serve` starts both with the process, and this is
    # then a no-op).
    start_in_background()
    work.start_in_serving_process()
    await router(scope, receive, send)
