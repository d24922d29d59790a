"""The MCP server admin: env and header values are write-only, and "List tools" shows a
server's tools or why it could not be reached."""

import sys

import pytest
from django.urls import reverse

from runners.models import McpServer
from runners.tests.tools.conftest import SECRET, SERVER
from runners.tools import mcp_servers

pytestmark = [pytest.mark.django_db, pytest.mark.processes]

ADD = reverse("admin:runners_mcpserver_add")
CHANGELIST = reverse("admin:runners_mcpserver_changelist")


def form(**fields):
    return {"name": "adder", "transport": "stdio", "command": sys.executable,
            "args": f'["{SERVER}"]', "url": "", "enabled": "on", "env": "", "headers": "",
            **fields}


def list_tools(browser, *servers):
    return browser.post(CHANGELIST, {"action": "list_tools",
                                     "_selected_action": [str(s.pk) for s in servers]},
                        follow=True)


def test_env_and_header_values_are_stored_encrypted_and_never_shown(admin_browser):
    created = admin_browser.post(ADD, form(env=f"GREETING={SECRET}\nREGION = eu",
                                           headers=f"Authorization: Bearer {SECRET}"))
    server = McpServer.objects.get()
    change = reverse("admin:runners_mcpserver_change", args=[server.pk])
    page = admin_browser.get(change)
    kept = admin_browser.post(change, form(command=sys.executable))  # env left blank: kept
    failed = admin_browser.post(change, form(command="", env=f"OTHER={SECRET}"))
    pages = [page, failed, admin_browser.get(CHANGELIST)]

    assert created.status_code == kept.status_code == 302
    assert mcp_servers.env(McpServer.objects.get()) == {"GREETING": SECRET, "REGION": "eu"}
    assert mcp_servers.headers(server) == {"Authorization": f"Bearer {SECRET}"}
    assert "GREETING, REGION" in page.content.decode()
    assert "Authorization" in page.content.decode()
    assert "A stdio server needs a command." in failed.content.decode()
    for response in pages:
        assert response.status_code == 200
        assert SECRET not in response.content.decode()


def test_env_can_be_removed(admin_browser):
    server = McpServer.objects.create(name="adder", command=sys.executable, args=[str(SERVER)])
    mcp_servers.set_env(server, {"GREETING": SECRET})
    server.save()

    admin_browser.post(reverse("admin:runners_mcpserver_change", args=[server.pk]),
                       form(clear_env="on"))

    assert mcp_servers.env(McpServer.objects.get()) == {}


def test_a_malformed_env_line_is_refused_without_echoing_it(admin_browser):
    response = admin_browser.post(ADD, form(env=f"{SECRET}"))

    assert response.status_code == 200
    assert "Write each variable as NAME=value" in response.content.decode()
    assert SECRET not in response.content.decode()
    assert not McpServer.objects.exists()


def test_list_tools_shows_the_tools_or_the_error(admin_browser):
    good = McpServer.objects.create(name="adder", command=sys.executable, args=[str(SERVER)])
    bad = McpServer.objects.create(name="broken", command="no-such-mcp-server")

    page = list_tools(admin_browser, good, bad).content.decode()

    assert "MCP server 'adder' lists 7 tool(s)" in page
    assert "<code>add</code> Add two numbers." in page
    assert "MCP server &#x27;broken&#x27; could not be reached: command not found: " \
           "no-such-mcp-server" in page
    good.refresh_from_db()
    assert "add" in {tool["name"] for tool in good.tools}
    change = admin_browser.get(reverse("admin:runners_mcpserver_change", args=[good.pk]))
    assert "<code>add</code> Add two numbers." in change.content.decode()


def test_the_list_marks_the_broken_server_not_the_healthy_one_and_shows_why(admin_browser):
    good = McpServer.objects.create(name="adder", command=sys.executable, args=[str(SERVER)])
    bad = McpServer.objects.create(name="crashes", command=sys.executable,
                                   args=["-c", "import a_module_nobody_installed"])
    untried = McpServer.objects.create(name="untried", command=sys.executable)

    page = list_tools(admin_browser, good, bad).content.decode()
    rows = {server.name: row for server in (good, bad, untried)
            for row in page.split("<tr")[1:] if f">{server.name}<" in row}

    assert "No module named &#x27;a_module_nobody_installed&#x27;" in page
    assert "icon-yes" in rows["adder"] and "icon-no" in rows["crashes"]
    assert "icon-unknown" in rows["untried"]


def test_an_http_server_is_added_without_arguments(admin_browser, http_url):
    added = admin_browser.post(ADD, form(name="remote", transport="streamable-http",
                                         command="", args="", url=http_url))

    assert added.status_code == 302
    server = McpServer.objects.get()
    assert (server.transport, server.url, server.args) == ("streamable-http", http_url, [])
