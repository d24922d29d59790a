"""Rotating DJANGO_SECRET_KEY: stored secrets keep working under a fallback key, and
`manage.py rotate_secrets` moves them to the new key so the fallback can go."""

import pytest
from asgiref.sync import sync_to_async
from django.core.management import CommandError, call_command

from runners.catalogue import runner_config
from runners.models import McpServer
from runners.providers.calls import CallInfo, invoke
from runners.providers.secrets import UnreadableKey, api_key
from runners.tests.providers.conftest import API_KEY
from runners.tools import mcp_servers
from tests.fake_providers import Reply

pytestmark = pytest.mark.django_db(transaction=True)

OLD_KEY = "the old secret key, long enough to be a real Django secret key: 0123456789"
NEW_KEY = "the new secret key, long enough to be a real Django secret key: 9876543210"


async def _key_reaching(openai_server, model) -> str:
    openai_server.script(Reply(text="hi"))
    await invoke(model, [{"role": "user", "content": "hi"}], call=CallInfo(caller="test"))
    return openai_server.calls()[-1].headers["authorization"]


async def test_a_provider_key_reaches_the_provider_under_a_fallback_then_after_rotation(
        settings, openai_server, make_model):
    settings.SECRET_KEY = OLD_KEY
    model = await sync_to_async(make_model)(openai_server, "gpt-rotated")

    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = NEW_KEY, [OLD_KEY]
    assert await _key_reaching(openai_server, model) == f"Bearer {API_KEY}"

    await sync_to_async(call_command)("rotate_secrets")
    settings.SECRET_KEY_FALLBACKS = []
    await model.provider.arefresh_from_db()
    assert await _key_reaching(openai_server, model) == f"Bearer {API_KEY}"


def test_without_the_fallback_an_unrotated_key_is_unreadable(settings, openai_server,
                                                            make_model):
    settings.SECRET_KEY = OLD_KEY
    provider = make_model(openai_server, "gpt-lost").provider
    settings.SECRET_KEY = NEW_KEY

    with pytest.raises(UnreadableKey):
        api_key(provider)
    with pytest.raises(CommandError, match=f"provider {provider.name}"):
        call_command("rotate_secrets")


def test_mcp_server_env_and_headers_survive_rotation(settings):
    settings.SECRET_KEY = OLD_KEY
    server = McpServer(name="files", transport="stdio", command="true")
    mcp_servers.set_env(server, {"TOKEN": "t-123"})
    mcp_servers.set_headers(server, {"X-Api-Key": "h-456"})
    server.save()

    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = NEW_KEY, [OLD_KEY]
    call_command("rotate_secrets")
    settings.SECRET_KEY_FALLBACKS = []
    server.refresh_from_db()

    assert mcp_servers.env(server) == {"TOKEN": "t-123"}
    assert mcp_servers.headers(server) == {"X-Api-Key": "h-456"}


def test_an_agent_types_secret_runner_config_survives_rotation(settings, make_agent_type):
    settings.SECRET_KEY = OLD_KEY
    schema = [{"name": "api-key", "type": "secret"}]
    agent_type = make_agent_type(runner_config=runner_config.sealed({"api-key": "k-789"}, schema))

    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = NEW_KEY, [OLD_KEY]
    call_command("rotate_secrets")
    settings.SECRET_KEY_FALLBACKS = []
    agent_type.refresh_from_db()

    assert runner_config.opened(agent_type.runner_config) == {"api-key": "k-789"}
