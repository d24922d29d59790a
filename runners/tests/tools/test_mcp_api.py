"""`/api/v1/mcp-servers`: superusers only; validation names the field; env and header values
are write-only; `refresh` lists a server's tools or says why it could not."""

import sys

import pytest

from runners.models import McpServer
from runners.tests.tools.conftest import SECRET, SERVER
from runners.tools import mcp_servers

pytestmark = pytest.mark.django_db

URL = "/api/v1/mcp-servers"


def stdio_body(**fields):
    return {"name": "adder", "transport": "stdio", "command": sys.executable,
            "args": [str(SERVER)], **fields}


def create(client, **fields):
    response = client.post(URL, stdio_body(**fields), format="json")
    assert response.status_code == 201, response.content
    return response.json()


def test_only_superusers_reach_mcp_servers(superuser_client, user_client):
    server = create(superuser_client)
    detail = f"{URL}/{server['id']}"

    assert user_client.get(URL).status_code == 403
    assert user_client.post(URL, stdio_body(name="other"), format="json").status_code == 403
    assert user_client.get(detail).status_code == 403
    assert user_client.patch(detail, {"enabled": False}, format="json").status_code == 403
    assert user_client.post(f"{detail}/refresh").status_code == 403
    assert user_client.delete(detail).status_code == 403
    assert superuser_client.get(URL).json()["data"][0]["name"] == "adder"


@pytest.mark.parametrize(("body", "field"), [
    ({"name": "a", "transport": "stdio"}, "command"),
    ({"name": "a", "transport": "stdio", "command": "  "}, "command"),
    ({"name": "a", "transport": "streamable-http"}, "url"),
    ({"name": "a", "transport": "streamable-http", "url": "not a url"}, "url"),
    ({"name": "a", "transport": "sse", "url": "http://h/mcp"}, "transport"),
    ({"name": "no spaces", "transport": "stdio", "command": "x"}, "name"),
    ({"name": "a", "transport": "stdio", "command": "x", "env": {"1BAD": "v"}}, "env"),
    ({"name": "a", "transport": "stdio", "command": "x", "args": "server.py"}, "args"),
    ({"name": "a", "transport": "streamable-http", "url": "http://h/mcp",
      "headers": {"Bad Header": "v"}}, "headers"),
])
def test_validation_names_the_field(superuser_client, body, field):
    response = superuser_client.post(URL, body, format="json")

    assert response.status_code == 400
    assert field in response.json()["errors"], response.json()


def test_a_patch_is_validated_as_the_server_would_be(superuser_client):
    server = create(superuser_client)

    response = superuser_client.patch(f"{URL}/{server['id']}",
                                      {"transport": "streamable-http"}, format="json")

    assert response.status_code == 400
    assert "url" in response.json()["errors"]


def test_env_and_headers_are_write_only(superuser_client):
    server = create(superuser_client, env={"API_TOKEN": SECRET, "REGION": "eu"})
    detail = f"{URL}/{server['id']}"
    patched = superuser_client.patch(detail, {
        "transport": "streamable-http", "url": "http://127.0.0.1:9/mcp",
        "headers": {"Authorization": f"Bearer {SECRET}"}}, format="json")
    responses = [patched, superuser_client.get(detail), superuser_client.get(URL)]
    stored = McpServer.objects.get(pk=server["id"])

    assert server["env_names"] == ["API_TOKEN", "REGION"]
    assert "env" not in server and "headers" not in server
    assert patched.json()["header_names"] == ["Authorization"]
    assert patched.json()["env_names"] == ["API_TOKEN", "REGION"]  # a PATCH without env keeps it
    for response in responses:
        assert response.status_code == 200
        assert SECRET not in response.content.decode()
    assert SECRET not in stored.env_encrypted + stored.headers_encrypted
    assert mcp_servers.env(stored) == {"API_TOKEN": SECRET, "REGION": "eu"}
    assert mcp_servers.headers(stored) == {"Authorization": f"Bearer {SECRET}"}


def test_writing_env_replaces_it_and_empty_removes_it(superuser_client):
    server = create(superuser_client, env={"A": "1", "B": "2"})
    detail = f"{URL}/{server['id']}"

    replaced = superuser_client.patch(detail, {"env": {"C": "3"}}, format="json").json()
    removed = superuser_client.patch(detail, {"env": {}}, format="json").json()

    assert replaced["env_names"] == ["C"]
    assert removed["env_names"] == []
    assert McpServer.objects.get(pk=server["id"]).env_encrypted == ""


@pytest.mark.processes  # the stdio MCP server
def test_refresh_lists_the_tools_and_keeps_them(superuser_client):
    server = create(superuser_client, env={"GREETING": SECRET})

    response = superuser_client.post(f"{URL}/{server['id']}/refresh")
    stored = superuser_client.get(f"{URL}/{server['id']}").json()

    assert response.status_code == 200
    assert response.json()["ok"] is True
    assert {"add", "echo", "greet"} <= {tool["name"] for tool in response.json()["tools"]}
    assert stored["tools"] == response.json()["tools"]
    assert stored["tools_refreshed_at"] is not None
    assert stored["last_error"] == ""


@pytest.mark.processes  # the MCP server over HTTP
def test_refresh_over_http(superuser_client, http_url):
    server = superuser_client.post(URL, {"name": "remote", "transport": "streamable-http",
                                         "url": http_url,
                                         "headers": {"X-Token": SECRET}}, format="json").json()

    response = superuser_client.post(f"{URL}/{server['id']}/refresh")

    assert response.json()["ok"] is True
    assert "add" in {tool["name"] for tool in response.json()["tools"]}


def test_refresh_answers_the_connection_error(superuser_client):
    server = create(superuser_client, command="no-such-mcp-server")

    response = superuser_client.post(f"{URL}/{server['id']}/refresh")
    stored = superuser_client.get(f"{URL}/{server['id']}").json()

    assert response.status_code == 200
    assert response.json() == {
        "ok": False, "error": "MCP server 'adder' could not be reached: command not found: "
                              "no-such-mcp-server"}
    assert stored["last_error"] == response.json()["error"]
    assert stored["tools"] == []


def test_refresh_of_a_disabled_server_says_so(superuser_client):
    server = create(superuser_client, enabled=False)

    response = superuser_client.post(f"{URL}/{server['id']}/refresh")

    assert response.json() == {"ok": False, "error": "MCP server 'adder' is disabled."}


def test_names_are_unique_and_a_server_deletes(superuser_client):
    server = create(superuser_client)

    again = superuser_client.post(URL, stdio_body(), format="json")
    deleted = superuser_client.delete(f"{URL}/{server['id']}")

    assert again.status_code == 400 and "name" in again.json()["errors"]
    assert deleted.status_code == 204
    assert not McpServer.objects.exists()


def test_env_stored_under_another_secret_key_says_to_set_it_again(superuser_client, settings):
    server = create(superuser_client, env={"GREETING": SECRET})
    settings.SECRET_KEY = "another-secret-key-than-the-one-it-was-stored-under"

    response = superuser_client.post(f"{URL}/{server['id']}/refresh")

    assert response.json() == {
        "ok": False, "error": "The env stored for MCP server 'adder' cannot be decrypted "
                              "(SECRET_KEY changed?); set it again."}
