"""The Content-Security-Policy header: the configured policy on every response, built once per
configuration; a view's own policy still applies."""

from csp.constants import HEADER
from django.http import HttpResponse
from django.test import RequestFactory

from langhost.middleware import CSPMiddleware


def respond(response=None) -> HttpResponse:
    middleware = CSPMiddleware(lambda request: response or HttpResponse("ok"))
    return middleware(RequestFactory().get("/api/v1/runs"))


def test_responses_carry_the_configured_policy(client):
    header = client.get("/api/v1/").headers[HEADER]

    assert "default-src 'self'" in header and "frame-ancestors 'none'" in header


def test_a_changed_configuration_changes_the_header(settings):
    before = respond()[HEADER]
    settings.CONTENT_SECURITY_POLICY = {"DIRECTIVES": {"default-src": ["'none'"]}}

    assert respond()[HEADER] == "default-src 'none'" != before


def test_a_views_own_policy_still_applies():
    own = HttpResponse("ok")
    own._csp_update = {"img-src": ["https://images.example"]}

    assert "https://images.example" in respond(own)[HEADER]
    assert "https://images.example" not in respond()[HEADER]
