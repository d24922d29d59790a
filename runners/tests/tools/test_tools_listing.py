"""`GET /api/v1/tools` and the admin's tools page list MCP servers' tools beside plugins',
as each server last listed them."""

import sys

import pytest
from django.utils import timezone

from runners.models import McpServer, ToolDescriptor

pytestmark = pytest.mark.django_db

ADD = {"name": "add", "description": "Add two numbers.",
       "inputSchema": {"type": "object", "required": ["a", "b"]}}


@pytest.fixture
def tools(db):
    ToolDescriptor.objects.create(id="plugin:e2e/tools-demo/reverse", name="reverse",
                                  plugin_author="e2e", plugin_name="tools-demo", available=True)
    McpServer.objects.create(name="calc", command=sys.executable, tools=[ADD],
                             tools_refreshed_at=timezone.now())
    McpServer.objects.create(name="down", command=sys.executable, last_error="it crashed",
                             tools=[{"name": "ping"}])


def test_the_tools_list_holds_mcp_tools_beside_plugin_tools(user_client, tools):
    listed = user_client.get("/api/v1/tools").json()["data"]
    mcp_only = user_client.get("/api/v1/tools?source=mcp&available=true").json()["data"]
    plugins_only = user_client.get("/api/v1/tools?source=plugin").json()["data"]
    of_calc = user_client.get("/api/v1/tools?server=calc").json()["data"]

    assert [(tool["id"], tool["source"]) for tool in listed] == [
        ("plugin:e2e/tools-demo/reverse", "plugin"), ("mcp:calc/add", "mcp"),
        ("mcp:down/ping", "mcp")]
    assert [tool["id"] for tool in mcp_only] == ["mcp:calc/add"]
    assert [tool["id"] for tool in plugins_only] == ["plugin:e2e/tools-demo/reverse"]
    assert of_calc[0]["server"] == "calc" and of_calc[0]["parameters"]["required"] == ["a", "b"]
    assert user_client.get("/api/v1/tools/mcp:calc/add").json()["description"] == \
        "Add two numbers."
    assert user_client.get("/api/v1/tools/mcp:calc/nope").status_code == 404


def test_the_admins_tools_page_shows_mcp_tools(admin_browser, tools):
    page = admin_browser.get("/admin/runners/tooldescriptor/").content.decode()

    assert "MCP tools" in page and "Add two numbers." in page and "it crashed" not in page
