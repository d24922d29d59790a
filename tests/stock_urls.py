"""LangHost's URLconf with DRF as it ships: the request path's conformance twin.

The same views, but each DRF view dispatches as stock DRF does (a sync `APIView.dispatch`,
its coroutine handlers awaited through `async_to_sync`, DRF's own content negotiation), so
that Django's stock `ASGIHandler` and middleware serve them as Django and DRF would without
LangHost's request-path work (`langhost/handlers.py`, `middleware.py`, `async_views.py`,
`negotiation.py`, `serializers.py`). `tests/test_request_path_conformance.py` sends both the
same requests.
"""

import inspect
from functools import wraps

from asgiref.sync import async_to_sync, iscoroutinefunction
from django.urls import URLPattern, URLResolver
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.views import APIView
from rest_framework.viewsets import ViewSetMixin

from langhost import urls
from langhost.base.async_views import AsyncDispatch
from langhost.base.negotiation import ContentNegotiation

STOCK_MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "axes.middleware.AxesMiddleware",
]


def _awaited(handler):
    @wraps(handler)
    def sync_handler(self, *args, **kwargs):
        return async_to_sync(handler)(self, *args, **kwargs)

    return sync_handler


def _coroutine_methods(cls) -> dict:
    found = {}
    for klass in reversed(cls.__mro__):
        for name, value in vars(klass).items():
            if not name.startswith("__") and name not in ("dispatch", "as_view") \
                    and inspect.isfunction(value) and iscoroutinefunction(value):
                found[name] = _awaited(value)
    return found


def stock_view_class(cls: type) -> type:
    """`cls` dispatching as DRF ships (same name and docs: OPTIONS shows them)."""
    attrs = {"__module__": cls.__module__, "__qualname__": cls.__qualname__,
             "__doc__": cls.__doc__}
    if issubclass(cls.content_negotiation_class, ContentNegotiation):
        attrs["content_negotiation_class"] = DefaultContentNegotiation
    if issubclass(cls, AsyncDispatch):
        base = ViewSetMixin if issubclass(cls, ViewSetMixin) else APIView
        attrs.update(_coroutine_methods(cls), dispatch=APIView.dispatch, view_is_async=False,
                     as_view=classmethod(base.__dict__["as_view"].__func__))
    return type(cls.__name__, (cls,), attrs)


def _stock(patterns: list) -> list:
    twins = []
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            twins.append(URLResolver(pattern.pattern, _stock(pattern.url_patterns),
                                     pattern.default_kwargs, pattern.app_name,
                                     pattern.namespace))
            continue
        view = pattern.callback
        cls = getattr(view, "cls", None)
        if cls is not None and issubclass(cls, APIView):
            twin = stock_view_class(cls)
            actions = getattr(view, "actions", None)
            view = (twin.as_view(actions, **view.initkwargs) if actions is not None
                    else twin.as_view(**view.initkwargs))
        twins.append(URLPattern(pattern.pattern, view, pattern.default_args, pattern.name))
    return twins


urlpatterns = _stock(urls.urlpatterns)
handler400 = urls.handler400
handler404 = urls.handler404
handler500 = urls.handler500
