"""Plugins without the host's secrets: a real plugin, run by the real runtime, finds none of
LangHost's secrets in its environment or in its runtime's, and, confined by either engine
(bubblewrap, or Python and the kernel alone), reads nothing but the system, Python and its own
folder (no data dir of any LangHost, no other plugin, no /etc/shadow), sees no process of the
host and cannot connect to LangHost's own ports."""

import asyncio
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from runners.execution.orchestrator import Orchestrator
from runners.protocol import AgentBinding, AgentEventEnvelope
from tests.timing import scaled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

SECRETS = {
    "DJANGO_SECRET_KEY": "canary-secret-key-5b1e",
    "LANGHOST_ADMIN_PASSWORD": "canary-admin-password-77d2",
    "DATABASE_URL": "postgres://canary:canary-db-password-0c4@127.0.0.1/x",
    "REDIS_URL": "redis://:canary-redis-password-9e3@127.0.0.1:6379/0",
    "LANGHOST_PROVIDER_OPENAI": "sk-canary-provider-key-1f8",
    "LANGBOT_PLUGIN_RUNTIME_CONTROL_TOKEN": "canary-control-token-a21",
}


async def test_a_plugin_finds_no_secret_of_the_host_in_any_environment(own_gateway,
                                                                       monkeypatch, settings):
    # Unconfined, so that the plugin can read its runtime's environment: the allow-list alone.
    settings.LANGHOST_PLUGIN_SANDBOX = "off"
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


async def test_a_confined_plugin_sees_only_the_system_python_and_its_own_folder(
        own_gateway, engine, tmp_path, settings):
    other_langhost = tmp_path / "another-langhost-data"
    other_langhost.mkdir()
    (other_langhost / "secret_key").write_text("another-secret")
    gateway = await own_gateway("e2e__agent-runner-qa", "e2e__tools-demo")
    await gateway.discover(scaled(20))  # the runtime up, its plugins linked into its dir
    own = gateway.plugins_dir / "e2e__agent-runner-qa" / "manifest.yaml"
    mine = [str(own), os.__file__, "/usr/bin/env"]  # no secrets: still readable
    secrets = [settings.DATA_DIR / "secret_key", f"/proc/{os.getpid()}/environ",
               f"/proc/{os.getppid()}/environ", Path(gateway.link.runtime_dir) / "data" / "plugins",
               gateway.plugins_dir / "e2e__tools-demo" / "manifest.yaml",
               gateway.plugins_dir / "e2e__tools-demo" / "main.py",
               settings.BASE_DIR / "README.md", other_langhost / "secret_key", "/etc/shadow"]
    if settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"):
        secrets.append(settings.DATABASES["default"]["NAME"])
    secrets = [str(path) for path in secrets]
    assert [path for path in secrets if not os.path.exists(path)] == []

    report = await _snoop(gateway, {"paths": [*secrets, *mine]})

    assert {path: report["readable"].pop(path) for path in mine} == dict.fromkeys(mine, True)
    assert report["readable"] == {path: False for path in secrets}
    assert os.getpid() not in report["processes"] and len(report["processes"]) <= 3
    assert report["runtime_env"] is None or str(gateway.link.runtime_dir) not in json.dumps(
        report["runtime_env"])


async def test_a_confined_plugin_cannot_connect_to_langhosts_own_ports(own_gateway, engine,
                                                                        settings):
    closed, opened = await _listener(), await _listener()
    settings.LANGHOST_SANDBOX_CLOSED_PORTS = [closed.port]
    gateway = await own_gateway("e2e__agent-runner-qa")
    await gateway.discover(scaled(20))
    try:
        report = await _snoop(gateway, {"ports": [closed.port, opened.port]})
    finally:
        closed.server.close()
        opened.server.close()

    assert report["connects"] == {str(closed.port): False, str(opened.port): True}


async def _snoop(gateway, asked: dict) -> dict:
    outcome = await Orchestrator(gateway).run_to_end(
        AgentEventEnvelope(event_id="snoop-2", event_type="message.received", source="test",
                           input={"text": json.dumps(asked)}),
        AgentBinding(binding_id="snoop", runner_id="plugin:e2e/agent-runner-qa/snoop"))
    assert outcome["status"] == "completed", outcome
    return json.loads(outcome["messages"][0]["data"]["message"]["content"])


async def _listener() -> SimpleNamespace:
    server = await asyncio.start_server(lambda reader, writer: writer.close(), "127.0.0.1", 0)
    return SimpleNamespace(server=server, port=server.sockets[0].getsockname()[1])
