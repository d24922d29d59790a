"""Plugins without the host's secrets: a real plugin, run by the real runtime, finds none of
LangHost's secrets in its environment or in its runtime's, and (confined by bubblewrap,
`make test` installs it) cannot read LangHost's files or see its processes."""

import json
import os

import pytest
from django.conf import settings

from runners.execution.orchestrator import Orchestrator
from runners.execution.protocol import AgentBinding, AgentEventEnvelope
from runners.plugins.gateway import plugin_sandbox

pytestmark = pytest.mark.django_db(transaction=True)

SECRETS = {
    "DJANGO_SECRET_KEY": "canary-secret-key-5b1e",
    "LANGHOST_ADMIN_PASSWORD": "canary-admin-password-77d2",
    "DATABASE_URL": "postgres://canary:canary-db-password-0c4@127.0.0.1/x",
    "REDIS_URL": "redis://:canary-redis-password-9e3@127.0.0.1:6379/0",
    "LANGHOST_PROVIDER_OPENAI": "sk-canary-provider-key-1f8",
    "LANGBOT_PLUGIN_RUNTIME_CONTROL_TOKEN": "canary-control-token-a21",
}


async def test_a_plugin_finds_no_secret_of_the_host_in_any_environment(own_gateway,
                                                                       monkeypatch):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LANGBOT_PLUGIN_RUNTIME_PROFILE", "passed-on")  # the SDK's own settings
    gateway = await own_gateway("e2e__agent-runner-qa")

    outcome = await Orchestrator(gateway).run_to_end(
        AgentEventEnvelope(event_id="snoop-1", event_type="message.received",
                           source="test", input={"text": json.dumps([])}),
        AgentBinding(binding_id="snoop", runner_id="plugin:e2e/agent-runner-qa/snoop"))

    assert outcome["status"] == "completed", outcome
    report = json.loads(outcome["messages"][0]["data"]["message"]["content"])
    seen = json.dumps([report["env"], report["runtime_env"]])
    assert report["runtime_env"] is not None  # read: the check looked where it says
    assert not [name for name, value in SECRETS.items() if value in seen]
    assert report["runtime_env"]["LANGBOT_PLUGIN_RUNTIME_PROFILE"] == "passed-on"
    assert str(settings.DATA_DIR) not in seen


async def test_a_confined_plugin_cannot_read_the_hosts_files_or_see_its_processes(
        own_gateway):
    if plugin_sandbox() is None:
        pytest.skip("bubblewrap cannot confine plugins here: `make servers` installs it")
    mine = settings.BASE_DIR / "README.md"  # a file that is no secret: still readable
    secrets = [settings.DATA_DIR / "secret_key", f"/proc/{os.getpid()}/environ",
               f"/proc/{os.getppid()}/environ"]
    if settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"):
        secrets.append(settings.DATABASES["default"]["NAME"])
    assert all(os.path.exists(path) for path in secrets)
    gateway = await own_gateway("e2e__agent-runner-qa")

    outcome = await Orchestrator(gateway).run_to_end(
        AgentEventEnvelope(event_id="snoop-2", event_type="message.received", source="test",
                           input={"text": json.dumps([*map(str, secrets), str(mine)])}),
        AgentBinding(binding_id="snoop", runner_id="plugin:e2e/agent-runner-qa/snoop"))

    readable = json.loads(outcome["messages"][0]["data"]["message"]["content"])["readable"]
    assert readable.pop(str(mine)) is True
    assert readable == {str(path): False for path in secrets}
