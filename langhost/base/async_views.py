"""DRF views served on the event loop.

DRF's views are sync: under ASGI, Django runs each in a thread, and authentication, the
handler and rendering follow it there. `AsyncDispatch` keeps DRF's request, parsers,
serializers, permissions, exception handling and schema, and dispatches on the loop:

- authentication through an authenticator's `aauthenticate` when it has one (the JWT one
  answers from its user cache), otherwise in a thread;
- a handler that is a coroutine runs on the loop; a sync one (a generic `list`, an admin-only
  action) runs in one thread hop, database work and serialization included;
- JSON is rendered on the loop; the browsable API, which reads the database to build its
  forms, in a thread.
"""

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.http import HttpResponse
from rest_framework import exceptions
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response


async def authenticate(request) -> None:
    """DRF's `Request._authenticate`, awaiting authenticators that can be awaited."""
    for authenticator in request.authenticators:
        try:
            if hasattr(authenticator, "aauthenticate"):
                user_and_auth = await authenticator.aauthenticate(request)
            else:
                user_and_auth = await sync_to_async(authenticator.authenticate)(request)
        except exceptions.APIException:
            request._not_authenticated()
            raise
        if user_and_auth is not None:
            request._authenticator = authenticator
            request.user, request.auth = user_and_auth
            return
    request._not_authenticated()


async def rendered(response):
    """A DRF `Response` rendered, as a plain `HttpResponse`: Django would render a template
    response once more, in a thread."""
    if not isinstance(response, Response):
        return response
    if isinstance(response.accepted_renderer, JSONRenderer):
        response.render()
    else:
        await sync_to_async(response.render)()
    return _plain(response)


def rendered_here(view, response: Response) -> HttpResponse:
    """`response` of `view` finalized and rendered in the calling thread: for a handler whose
    answer is too large to render on the event loop."""
    return _plain(view.finalize_response(view.request, response).render())


def _plain(response: Response) -> HttpResponse:
    plain = HttpResponse(response.content, status=response.status_code,
                         headers=dict(response.items()))
    if "Content-Type" not in response:  # DRF sends none with an empty body (a 204)
        del plain["Content-Type"]
    plain.cookies = response.cookies
    # What a view asked of django-csp for this response (`csp_update`, `csp_exempt`, …).
    plain.__dict__.update({name: value for name, value in response.__dict__.items()
                           if name.startswith("_csp")})
    return plain


class AsyncDispatch:
    """Mixed into an `APIView` or a viewset: its dispatch runs on the event loop."""

    view_is_async = True

    @classmethod
    def as_view(cls, *args, **kwargs):
        view = super().as_view(*args, **kwargs)
        markcoroutinefunction(view)  # a viewset's view function: Django awaits it
        return view

    async def dispatch(self, request, *args, **kwargs):
        self.args = args
        self.kwargs = kwargs
        request = self.initialize_request(request, *args, **kwargs)
        self.request = request
        self.headers = self.default_response_headers
        try:
            # DRF's `initial`, in its order (negotiation before authentication: a client that
            # accepts nothing we render hears 406 first), with authentication awaited.
            self.format_kwarg = self.get_format_suffix(**kwargs)
            request.accepted_renderer, request.accepted_media_type = \
                self.perform_content_negotiation(request)
            request.version, request.versioning_scheme = self.determine_version(
                request, *args, **kwargs)
            await authenticate(request)
            self.check_permissions(request)
            self.check_throttles(request)
            method = request.method.lower()
            handler = (getattr(self, method, self.http_method_not_allowed)
                       if method in self.http_method_names else self.http_method_not_allowed)
            if iscoroutinefunction(handler):
                response = await handler(request, *args, **kwargs)
            else:
                response = await sync_to_async(handler)(request, *args, **kwargs)
        except Exception as exc:
            response = self.handle_exception(exc)
        self.response = self.finalize_response(request, response, *args, **kwargs)
        return await rendered(self.response)
