"""Content negotiation: the shortcut for clients that accept anything answers as DRF does,
and every other request still goes through DRF's negotiation."""

import pytest
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from langhost.base.negotiation import ContentNegotiation

RENDERERS = [JSONRenderer(), BrowsableAPIRenderer()]


def request(path="/api/v1/runs", **headers) -> Request:
    return Request(APIRequestFactory().get(path, **headers))


@pytest.mark.parametrize("headers", [
    {}, {"HTTP_ACCEPT": "*/*"}, {"HTTP_ACCEPT": "text/html"},
    {"HTTP_ACCEPT": "application/json; indent=4"}, {"HTTP_ACCEPT": "text/html, */*;q=0.8"},
])
def test_the_answer_is_drfs_own(headers):
    ours = ContentNegotiation().select_renderer(request(**headers), RENDERERS)
    drfs = DefaultContentNegotiation().select_renderer(request(**headers), RENDERERS)

    assert (type(ours[0]), ours[1]) == (type(drfs[0]), drfs[1])


def test_a_format_asked_for_wins_over_accepting_anything():
    renderer, media_type = ContentNegotiation().select_renderer(
        request("/api/v1/runs?format=api", HTTP_ACCEPT="*/*"), RENDERERS)

    assert (type(renderer), media_type) == (BrowsableAPIRenderer, "text/html")


def test_an_api_client_gets_json_and_a_browser_the_browsable_api(client, django_user_model):
    user = django_user_model.objects.create_superuser(email="neg@example.com",
                                                      password="Passw0rd-xyz-9")
    client.force_login(user)

    assert client.get("/api/v1/runs", HTTP_ACCEPT="*/*")["Content-Type"] == "application/json"
    assert client.get("/api/v1/runs", HTTP_ACCEPT="text/html")["Content-Type"].startswith(
        "text/html")
