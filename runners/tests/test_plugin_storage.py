"""A plugin's binary storage lives in the `PluginStorage` table, per plugin."""

import json

import pytest
from django.db.models.signals import post_save

from runners.execution.orchestrator import Orchestrator
from runners.models import PluginStorage
from runners.protocol import AgentBinding, AgentEventEnvelope

pytestmark = [pytest.mark.processes, pytest.mark.asyncio(loop_scope="session"), pytest.mark.django_db(transaction=True)]

OWNER = "e2e/agent-runner-qa"


@pytest.fixture
def saved_rows():
    rows = []

    def record(sender, instance, **kwargs):
        rows.append((instance.owner_type, instance.owner, instance.key, bytes(instance.value)))

    post_save.connect(record, sender=PluginStorage, weak=False)
    yield rows
    post_save.disconnect(record, sender=PluginStorage)


async def api_caller_report(gateway) -> dict:
    binding = AgentBinding(binding_id="storage", runner_id=f"plugin:{OWNER}/api-caller",
                           state_policy={"state_scopes": ["conversation"]})
    event = AgentEventEnvelope(conversation_id="conv-storage", input={"text": "store"})
    outcome = await Orchestrator(gateway).run_to_end(event, binding)
    assert outcome["status"] == "completed", outcome
    return json.loads(outcome["messages"][0]["data"]["message"]["content"])


async def test_plugin_storage_set_writes_a_row_owned_by_the_plugin(qa_gateway, saved_rows):
    report = await api_caller_report(qa_gateway)

    assert report["plugin_storage_set"] == {"ok": None}
    assert ("plugin", OWNER, "e2e.blob", b"\x00e2e") in saved_rows


async def test_plugin_storage_reads_keys_and_deletes_come_from_the_table(qa_gateway):
    await PluginStorage.objects.acreate(owner_type="plugin", owner=OWNER, key="kept", value=b"k")
    await PluginStorage.objects.acreate(owner_type="plugin", owner="other/plugin", key="theirs",
                                        value=b"x")

    report = await api_caller_report(qa_gateway)

    assert report["plugin_storage_get"] == {"ok": b"\x00e2e".hex()}
    assert report["plugin_storage_keys"] == {"ok": ["e2e.blob", "kept"]}  # its own keys only
    assert "storage.not_found" in report["plugin_storage_get_deleted"]["message"]
    remaining = [(row.owner, row.key) async for row in PluginStorage.objects.order_by("owner")]
    assert remaining == [(OWNER, "kept"), ("other/plugin", "theirs")]
