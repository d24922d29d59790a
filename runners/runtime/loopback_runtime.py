"""Start the SDK's plugin runtime (`rt`, its own CLI) with nothing exposed beyond loopback.

The SDK binds its WebSocket servers to 0.0.0.0 and answers `/healthz` on them to anyone.
LangHost drives the runtime over stdio and its plugin processes reach it over loopback, so
here every server binds 127.0.0.1 and `/healthz` goes through the server's authentication
like any other request. Run by path (`python loopback_runtime.py rt …`), the SDK unmodified
on disk.
"""

from langbot_plugin.cli import main
from langbot_plugin.runtime.io.controllers.ws import server

LOOPBACK = "127.0.0.1"
_init = server.WebSocketServerController.__init__


def _init_on_loopback(self, port, *, host=LOOPBACK, **options):
    _init(self, port, host=LOOPBACK, **options)


def _no_public_health(connection, request, health_snapshot_provider=None):
    return None  # not answered before authentication: a request without credentials gets 401


server.WebSocketServerController.__init__ = _init_on_loopback
server.process_http_request = _no_public_health

if __name__ == "__main__":
    main()
