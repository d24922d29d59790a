"""Django's middleware, on the event loop.

Django's own middleware classes are async-capable, but under ASGI each of their hooks runs in
a thread (`MiddlewareMixin.__acall__` hands every `process_request` and `process_response` to
`sync_to_async`): about a dozen thread hops for every request, the API's included. These
subclasses keep Django's code and run its hooks on the loop, because the hooks only read the
request and set headers, cookies and lazy attributes. The few cases that touch the database
or the request body still go to a thread: saving a session, storing messages, checking the
CSRF token of a form posted to a view that is not exempt.
"""

from asgiref.sync import sync_to_async
from csp import middleware as csp
from django.conf import settings
from django.contrib.auth import middleware as auth
from django.contrib.messages import middleware as messages
from django.contrib.sessions import middleware as sessions
from django.middleware import clickjacking, common, csrf, security
from django.utils.deprecation import MiddlewareMixin

from langhost.handlers import RESOLVED


class OnTheLoop(MiddlewareMixin):
    """Runs a Django middleware's hooks on the loop; `response_needs_thread` names the
    responses whose `process_response` must run in a thread."""

    async def __acall__(self, request):
        response = None
        if hasattr(self, "process_request"):
            response = self.process_request(request)
        response = response or await self.get_response(request)
        if not hasattr(self, "process_response"):
            return response
        if self.response_needs_thread(request):
            return await sync_to_async(self.process_response)(request, response)
        return self.process_response(request, response)

    def response_needs_thread(self, request) -> bool:
        return False


class SecurityMiddleware(OnTheLoop, security.SecurityMiddleware):
    pass


class SessionMiddleware(OnTheLoop, sessions.SessionMiddleware):
    def response_needs_thread(self, request) -> bool:
        session = getattr(request, "session", None)
        return session is not None and (session.modified or settings.SESSION_SAVE_EVERY_REQUEST)


class CommonMiddleware(OnTheLoop, common.CommonMiddleware):
    def should_redirect_with_slash(self, request) -> bool:
        # A path LangHost's handler resolved is valid as it is: Django would resolve it again
        # to find out (langhost/handlers.py).
        if RESOLVED in getattr(request, "scope", ()) and getattr(request, "urlconf", None) is None:
            return False
        return super().should_redirect_with_slash(request)


class CsrfViewMiddleware(OnTheLoop, csrf.CsrfViewMiddleware):
    async def process_view(self, request, callback, callback_args, callback_kwargs):
        if getattr(callback, "csrf_exempt", False) or request.method in {
                "GET", "HEAD", "OPTIONS", "TRACE"}:
            # Django's own answer for these reads neither the body nor the database.
            return super().process_view(request, callback, callback_args, callback_kwargs)
        return await sync_to_async(super().process_view)(request, callback, callback_args,
                                                         callback_kwargs)


class AuthenticationMiddleware(OnTheLoop, auth.AuthenticationMiddleware):
    pass


class MessageMiddleware(OnTheLoop, messages.MessageMiddleware):
    def response_needs_thread(self, request) -> bool:
        storage = getattr(request, "_messages", None)
        return storage is not None and (storage.used or storage.added_new)


class XFrameOptionsMiddleware(OnTheLoop, clickjacking.XFrameOptionsMiddleware):
    pass


class CSPMiddleware(OnTheLoop, csp.CSPMiddleware):
    pass
