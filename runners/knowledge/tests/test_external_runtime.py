"""With the runtime started separately (the SDK's own `rt`, as an operator runs it for
`LANGHOST_RUNTIME_URL`), a plugin's knowledge and vector actions are answered: the SDK's
runtime forwards them with the calling plugin's installation, which names the caller."""

import json

import pytest

from runners.execution.orchestrator import Orchestrator
from runners.knowledge.tests.test_grants import base_of, ingested, read
from runners.plugins.gateway import LocalGateway
from runners.protocol import AgentBinding, AgentEventEnvelope
from runners.tests.conftest import serve_as_process_gateway
from tests.runtime.runtime_helpers import TOKEN, ExternalRuntime, make_runtime_dir
from tests.timing import scaled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]


@pytest.fixture
async def external_gateway(tmp_path, monkeypatch):
    runtime_dir = make_runtime_dir(tmp_path / "rt", "e2e__agent-runner-llm")
    runtime = ExternalRuntime(runtime_dir)
    runtime.start()
    gateway = LocalGateway(plugins_dir=runtime_dir / "data" / "plugins", url=runtime.url,
                           token=TOKEN, instance="external-runtime")
    serve_as_process_gateway(monkeypatch, gateway)
    try:
        await gateway.start()
        await gateway.discover(scaled(30))
        yield gateway
    finally:
        await gateway.stop()
        runtime.kill()


async def test_a_plugin_runner_retrieves_from_its_granted_base_over_an_external_runtime(
        external_gateway, user, embedding_model):
    assert external_gateway.link.mode == "ws"
    harbour = await base_of(user, "Harbour", embedding_model,
                            "Divers register with the harbour master before diving.")
    await ingested(harbour)

    report = await read(external_gateway, harbour.project_id, "where do divers register",
                        **{"knowledge-bases": [str(harbour.pk)]})
    vectors = await Orchestrator(external_gateway).run_to_end(
        AgentEventEnvelope(input={"text": json.dumps([
            {"action": "vector_upsert", "data": {"collection_id": "notes", "ids": ["n1"],
                                                 "vectors": [[1, 0]], "documents": ["hi"]}},
            {"action": "vector_list", "data": {"collection_id": "notes"}}])}),
        AgentBinding(binding_id="raw", runner_id="plugin:e2e/agent-runner-llm/raw-actions"))

    (top, *_) = report["retrieved"]
    assert "register with the harbour master" in top["content"][0]["text"]
    assert vectors["status"] == "completed", vectors["status_reason"]
    upserted, listed = json.loads(vectors["messages"][0]["data"]["message"]["content"])
    assert upserted == {"ok": {}}
    assert [item["id"] for item in listed["ok"]["items"]] == ["n1"], listed
