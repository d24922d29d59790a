"""Django's middleware, on the event loop.

Django's own middleware classes are async-capable, but under ASGI each of their hooks runs in
a thread (`MiddlewareMixin.__acall__` hands every `process_request` and `process_response` to
`sync_to_async`): a thread hop for every hook of every request, the API's included. These
subclasses keep Django's code and run its hooks on the loop, because the hooks only read the
request and set headers, cookies and lazy attributes. The few cases that touch the database
or the request body still go to a thread: saving a session, storing messages, checking the
CSRF token of a form posted to a view that is not exempt.
"""

from asgiref.sync import sync_to_async
from csp import middleware as csp
from csp.constants import HEADER, HEADER_REPORT_ONLY
from csp.utils import build_policy
from django.conf import settings
from django.contrib.auth import middleware as auth
from django.contrib.messages import middleware as messages
from django.contrib.messages.storage import default_storage
from django.contrib.sessions import middleware as sessions
from django.middleware import clickjacking, common, csrf, security
from django.utils.deprecation import MiddlewareMixin
from django.utils.functional import SimpleLazyObject, empty

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
    """Django's, with a request's message storage made when first used: an API request never
    uses it, and making it (three storages) cost more than the rest of this hook."""

    def process_request(self, request):
        request._messages = SimpleLazyObject(lambda: default_storage(request))

    def process_response(self, request, response):
        if messages_unused(request):
            return response
        return super().process_response(request, response)

    def response_needs_thread(self, request) -> bool:
        if messages_unused(request):
            return False
        storage = getattr(request, "_messages", None)
        return storage is not None and (storage.used or storage.added_new)


def messages_unused(request) -> bool:
    storage = request.__dict__.get("_messages")
    return isinstance(storage, SimpleLazyObject) and storage._wrapped is empty


class XFrameOptionsMiddleware(OnTheLoop, clickjacking.XFrameOptionsMiddleware):
    pass


# What a view's own policy sets on its response (django-csp's decorators).
_OWN_POLICY = tuple(f"_csp_{kind}{suffix}" for kind in ("exempt", "update", "replace", "config")
                    for suffix in ("", "_ro"))


class CSPMiddleware(OnTheLoop, csp.CSPMiddleware):
    """django-csp's, with the configured policy's headers built once per configuration.

    django-csp builds them for every response, the costliest hook of a request to start a
    run. A view with a policy of its own, a page that used a nonce, an excluded path and a
    debug error page still get django-csp's own answer.
    """

    built: tuple = (None, None, {})  # (policy, report-only policy, {header: value})

    def process_response(self, request, response):
        headers = self.configured_headers()
        if (headers is None or getattr(request, "_csp_nonce", None) is not None
                or any(hasattr(response, name) for name in _OWN_POLICY)
                or any(header in response for header in headers)
                or (settings.DEBUG and response.status_code in (404, 500))):
            return super().process_response(request, response)
        for header, value in headers.items():
            response[header] = value
        # As django-csp: a nonce asked for now would be in no header.
        request.csp_nonce = csp.CheckableLazyObject(self._csp_nonce_post_response)
        return response

    def configured_headers(self) -> dict[str, str] | None:
        """The headers of the configured policies; None when a policy excludes paths."""
        policy = getattr(settings, "CONTENT_SECURITY_POLICY", None)
        report_only = getattr(settings, "CONTENT_SECURITY_POLICY_REPORT_ONLY", None)
        if (policy or {}).get("EXCLUDE_URL_PREFIXES") or (report_only or {}).get(
                "EXCLUDE_URL_PREFIXES"):
            return None
        if self.built[0] is not policy or self.built[1] is not report_only:
            headers = {HEADER: build_policy(), HEADER_REPORT_ONLY: build_policy(report_only=True)}
            self.built = (policy, report_only, {name: value for name, value in headers.items()
                                                if value})
        return self.built[2]
