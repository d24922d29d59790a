"""The Content-Security-Policy header: the configured policy on every response, built once per
configuration; a view's own policy still applies."""

import pytest
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


@pytest.mark.django_db
def test_the_browsable_apis_log_out_works_under_the_policy(client, user):
    client.force_login(user)

    page = client.get("/api/v1/", HTTP_ACCEPT="text/html").content.decode()

    assert "onclick" not in page  # an inline handler the policy refuses
    assert 'id="logoutForm"' in page and 'type="submit"' in page
    client.post("/api/auth/logout/?next=/api/v1/")
    assert "Log in" in client.get("/api/v1/", HTTP_ACCEPT="text/html").content.decode()
