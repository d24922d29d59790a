"""What runs unconfined is said where people look — every admin page, `/healthz`, `serve` —
and only by the operator's choice; an agent type cannot enable the box where no confinement
can be had."""

import pytest
from django.core.management import CommandError, call_command

from runners.tests.test_agent_types import URL

pytestmark = pytest.mark.django_db

BANNER = 'id="unconfined"'


def pages(admin_browser) -> list[str]:
    return [admin_browser.get(path).content.decode()
            for path in ("/admin/", "/admin/runtime/", "/admin/runners/agenttype/")]


def test_a_confined_host_shows_no_banner(admin_browser):
    assert [BANNER in page for page in pages(admin_browser)] == [False, False, False]


def test_a_box_run_as_host_unsafe_is_said_on_every_admin_page(admin_browser, settings):
    settings.LANGHOST_BOX_BACKEND = "host-unsafe"

    shown = pages(admin_browser)

    assert all(BANNER in page and "isolated from nothing" in page for page in shown)
    assert "runs commands as this machine's user and isolates nothing" in shown[1]


def test_plugins_run_unconfined_by_choice_are_said_on_every_admin_page_and_healthz(
        admin_browser, client, settings):
    settings.LANGHOST_PLUGIN_SANDBOX = "off"

    assert all(BANNER in page and "Plugins run unconfined" in page
               for page in pages(admin_browser))
    assert client.get("/healthz").json()["confinement"]["plugins"] == "unconfined"


def test_healthz_says_how_plugins_and_the_box_are_confined(client):
    answer = client.get("/healthz").json()

    assert answer["status"] == "ok"
    assert answer["confinement"]["plugins"] in ("bwrap", "namespaces")
    assert answer["confinement"]["box"] == "sandbox"


def test_the_box_needs_a_backend_that_confines_or_one_named_unsafe(superuser_client, settings):
    settings.LANGHOST_BOX_BACKEND = "host"  # the SDK's name: isolates nothing, not said so

    boxer = {"name": "Boxer", "slug": "boxer", "box_enabled": True}
    refused = superuser_client.post(URL, boxer, format="json")
    settings.LANGHOST_BOX_BACKEND = "host-unsafe"
    accepted = superuser_client.post(URL, boxer, format="json")

    assert refused.status_code == 400, refused.json()
    assert "'host', which is not a box backend" in refused.json()["errors"]["box_enabled"][0]
    assert accepted.status_code == 201, accepted.json()


def test_serve_refuses_to_start_when_the_sandbox_mode_cannot_be_had(settings):
    settings.LANGHOST_PLUGIN_SANDBOX = "strict"

    with pytest.raises(CommandError, match="LANGHOST_PLUGIN_SANDBOX is 'strict'"):
        call_command("serve")
