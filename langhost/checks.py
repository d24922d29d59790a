"""Django's security checks, for the middleware LangHost runs on the event loop.

Django finds its security, CSRF and clickjacking middleware in `MIDDLEWARE` by dotted path,
and checks the settings they act on (HSTS, SSL redirect, the CSRF cookie, X-Frame-Options,
...) only when it finds them there. LangHost lists subclasses instead (langhost/middleware.py):
settings silence Django's three "not in MIDDLEWARE" warnings, and this check runs Django's
security checks again with each subclass named as the Django class it extends.
"""

from django.conf import settings
from django.core.checks import Tags, Warning, register
from django.core.checks.security import base, csrf
from django.test.utils import override_settings
from django.utils.module_loading import import_string

# The checks that look for these middleware by name, and the ones that need them.
DJANGO_MIDDLEWARE_CHECKS = [
    base.check_security_middleware, base.check_xframe_options_middleware, base.check_sts,
    base.check_sts_include_subdomains, base.check_sts_preload, base.check_content_type_nosniff,
    base.check_ssl_redirect, base.check_xframe_deny, base.check_referrer_policy,
    base.check_cross_origin_opener_policy, csrf.check_csrf_middleware,
    csrf.check_csrf_cookie_secure,
]
SILENCED_BY_SETTINGS = {"security.W001", "security.W002", "security.W003"}


def as_django_names(middleware: list[str]) -> list[str]:
    """Each LangHost subclass of a Django middleware named as that Django class."""
    named = []
    for path in middleware:
        if path.startswith("langhost."):
            django_class = next(cls for cls in import_string(path).__mro__[1:]
                                if cls.__module__.startswith(("django.", "csp.")))
            path = f"{django_class.__module__}.{django_class.__qualname__}"
        named.append(path)
    return named


@register(Tags.security, deploy=True)
def check_middleware_as_django_names_it(app_configs, **kwargs):
    with override_settings(MIDDLEWARE=as_django_names(settings.MIDDLEWARE)):
        found = [message for check in DJANGO_MIDDLEWARE_CHECKS for message in check(app_configs)]
    # Django's own "not in MIDDLEWARE" warnings are silenced for the names it looks for: a
    # middleware missing under both names is reported here.
    return [Warning(message.msg, id=message.id.replace("security.", "langhost."))
            if message.id in SILENCED_BY_SETTINGS else message for message in found]
