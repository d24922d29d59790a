"""A plugin's `Page`, as LangBot serves one: listed on its installation in the admin, shown in
a sandboxed frame whose files come from a signed path (the frame sends no cookie), its calls
answered by the plugin's `handle_api` through the admin page; to those who may change the
installation only. Real runtime, the example plugin `langhost__examples` (`make run`'s)."""

import re

import pytest
import pytest_asyncio
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from runners.models import PluginInstallation
from runners.plugins import pages
from tests.timing import scaled

STATUS_PAGE = {"id": "status", "label": {"en_US": "Status"},
               "path": "components/pages/status/status.html"}


@pytest_asyncio.fixture
async def examples_gateway(own_gateway):
    gateway = await own_gateway("langhost__examples")
    await gateway.discover(scaled(30))
    return gateway


def frame_url(client: Client, installation: PluginInstallation) -> str:
    page = client.get(reverse("admin:runners_plugininstallation_page",
                              args=[installation.pk, "status"]))
    assert page.status_code == 200
    return re.search(r'<iframe id="plugin-page"[^>]* src="([^"]+)"', page.content.decode())[1]


def call(client: Client, installation: PluginInstallation, endpoint: str, body=None):
    return client.post(reverse("admin:runners_plugininstallation_page_api",
                               args=[installation.pk, "status"]),
                       {"endpoint": endpoint, "method": "post", "body": body},
                       content_type="application/json")


@pytest.mark.django_db(transaction=True)
@pytest.mark.processes
async def test_a_page_is_listed_served_in_a_sandbox_and_its_calls_reach_its_plugin(
        examples_gateway, admin_browser):
    installation = await PluginInstallation.objects.aget(author="langhost", name="examples")
    assert installation.pages == [STATUS_PAGE]
    change = await sync_to_async(admin_browser.get)(
        reverse("admin:runners_plugininstallation_change", args=[installation.pk]))
    assert reverse("admin:runners_plugininstallation_page",
                   args=[installation.pk, "status"]).encode() in change.content

    url = await sync_to_async(frame_url)(admin_browser, installation)
    anonymous = Client()  # the frame's own requests carry no session
    html = await sync_to_async(anonymous.get)(url)
    translations = await sync_to_async(anonymous.get)(url.rsplit("/", 1)[0] + "/i18n/en_US.json")
    missing = await sync_to_async(anonymous.get)(url.rsplit("/", 1)[0] + "/i18n/xx.json")
    script = await sync_to_async(anonymous.get)("/api/v1/plugins/_sdk/page-sdk.js")
    echoed = await sync_to_async(call)(admin_browser, installation, "/echo", {"n": 1})
    refused = await sync_to_async(call)(admin_browser, installation, "/nope")

    assert html.status_code == 200 and b'src="/api/v1/plugins/_sdk/page-sdk.js"' in html.content
    assert "sandbox allow-scripts" in html["Content-Security-Policy"]
    assert "frame-ancestors 'self'" in html["Content-Security-Policy"]
    assert html["X-Frame-Options"] == "SAMEORIGIN"
    assert translations.json() == {"title": "LangHost examples: status"}
    assert (missing.status_code, missing["Access-Control-Allow-Origin"]) == (404, "*")
    assert script.status_code == 200 and b"langbot:api" in b"".join(script.streaming_content)
    assert echoed.json() == {"data": {"method": "POST", "received": {"n": 1}}, "error": None}
    assert refused.json() == {"data": None, "error": "no endpoint /nope"}


@pytest.fixture
def installation(db):
    return PluginInstallation.objects.create(author="langhost", name="examples",
                                             installation_uuid="examples-uuid",
                                             pages=[STATUS_PAGE])


@pytest.fixture
def staff_client(make_user):
    def make(*permissions: str) -> Client:
        staff = make_user(is_staff=True)
        staff.user_permissions.add(*Permission.objects.filter(codename__in=permissions))
        client = Client()
        client.force_login(staff)
        return client
    return make


def test_a_page_opens_only_for_who_may_change_its_plugin(installation, staff_client):
    viewer = staff_client("view_plugininstallation")
    page_url = reverse("admin:runners_plugininstallation_page", args=[installation.pk, "status"])

    assert viewer.get(page_url).status_code == 403
    assert call(viewer, installation, "/echo").status_code == 403
    assert staff_client("view_plugininstallation", "change_plugininstallation").get(
        reverse("admin:runners_plugininstallation_page", args=[installation.pk, "nope"])
    ).status_code == 404


def test_the_frames_files_need_a_valid_signature_of_someone_who_may_still_see_them(
        installation, make_user, superuser, client):
    staff = make_user(is_staff=True)
    not_permitted = pages.files_token(installation, "status", staff.pk)
    permitted = pages.files_token(installation, "status", superuser.pk)
    forged = permitted[:-2] + ("AA" if not permitted.endswith("AA") else "BB")

    for token in (not_permitted, forged):
        url = reverse("admin:runners_plugininstallation_page_file", args=[token, "status.html"])
        assert client.get(url).status_code == 403
    assert pages.read_files_token(permitted) == {"plugin": "langhost/examples",
                                                 "page": "status", "user": superuser.pk}
    assert pages.read_files_token(forged) is None


def test_a_page_reads_files_beside_it_and_never_above():
    assert pages.file_path(STATUS_PAGE, "i18n/en_US.json") == \
        "components/pages/status/i18n/en_US.json"
    assert pages.file_path(STATUS_PAGE, "status.html") == STATUS_PAGE["path"]
    assert pages.file_path(STATUS_PAGE, "../../../main.py") is None
    assert pages.file_path(STATUS_PAGE, "/etc/passwd") is None
