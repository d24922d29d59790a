"""In-run API calls are authorized from the run row, whoever forwards them."""

import pytest

from ledger.models import AgentRun, Conversation
from runners.hostapi import knowledge_api, run_api, tool_api
from runners.models import PluginInstallation
from runners.runtime.host_actions import HostError

pytestmark = pytest.mark.django_db(transaction=True)

OWNER = "e2e/agent-runner-qa"


@pytest.fixture
async def active_run():
    return await AgentRun.objects.acreate(
        run_id="run-authz", event_id="evt-authz", runner_id=f"plugin:{OWNER}/default",
        status="running", conversation_id="conv-authz",
        authorization_json={
            "plugin_identity": OWNER,
            "available_apis": {"state": True, "run_get": True},
            "state_context": {"conversation": {"scope_key": "conversation:v2:abc", "identity": {}}},
        },
    )


async def call(action, **data):
    return await run_api.handle(action, {"caller_plugin_identity": OWNER, **data}, None)


async def test_state_call_for_the_callers_own_run_is_answered(active_run):
    assert await call("state_get", run_id="run-authz", scope="conversation", key="k") == {"value": None}


async def test_unknown_run_id_is_refused(active_run):
    with pytest.raises(HostError) as refused:
        await call("state_get", run_id="no-such-run", scope="conversation", key="k")
    assert refused.value.code == "run.not_found"


async def test_run_of_another_plugin_is_refused(active_run):
    with pytest.raises(HostError) as refused:
        await run_api.handle("run_get", {"run_id": "run-authz",
                                         "caller_plugin_identity": "someone/else"}, None)
    assert refused.value.code == "run.identity_mismatch"


async def test_scope_the_binding_does_not_enable_is_refused(active_run):
    with pytest.raises(HostError) as refused:
        await call("state_set", run_id="run-authz", scope="actor", key="k", value=1)
    assert refused.value.code == "state.scope_not_enabled"
    assert "state.scope_not_enabled" in str(refused.value)  # the runtime relays only the text


async def test_api_not_granted_to_the_run_is_refused(active_run):
    with pytest.raises(HostError) as refused:
        await call("history_page", run_id="run-authz")
    assert refused.value.code == "api.not_available"


async def test_writes_to_a_finished_run_are_refused(active_run):
    await AgentRun.objects.filter(run_id="run-authz").aupdate(status="completed")
    with pytest.raises(HostError) as refused:
        await call("state_set", run_id="run-authz", scope="conversation", key="k", value=1)
    assert refused.value.code == "run.not_active"


async def test_oversize_state_value_is_refused(active_run):
    with pytest.raises(HostError) as refused:
        await call("state_set", run_id="run-authz", scope="conversation", key="k",
                   value="x" * (256 * 1024 + 1))
    assert refused.value.code == "state.too_large"


@pytest.mark.parametrize("caller", [None, ""])
async def test_an_unnamed_caller_is_refused(active_run, caller):
    with pytest.raises(HostError) as refused:
        await run_api.handle("run_get", {"run_id": "run-authz", "caller_plugin_identity": caller},
                             None)
    assert refused.value.code == "run.identity_mismatch"
    assert "unnamed or unknown caller" in str(refused.value)


async def test_a_call_from_an_installation_langhost_does_not_know_is_refused(active_run):
    with pytest.raises(HostError) as refused:
        await run_api.handle("run_get", {"run_id": "run-authz", "caller_plugin_identity": OWNER},
                             {"installation_uuid": "no-such-installation"})
    assert refused.value.code == "run.identity_mismatch"


async def test_a_platform_reply_whose_message_is_no_message_is_refused_naming_it(active_run):
    grants = {**active_run.authorization_json, "resources": {"tools": [
        {"tool_name": "event_reply", "operations": ["call"]}]}}
    await AgentRun.objects.filter(pk=active_run.pk).aupdate(authorization_json=grants)
    await Conversation.objects.acreate(conversation_id="conv-authz", client_id="authz",
                                       project_id="p", agent_id="a", user_id="u")

    with pytest.raises(HostError) as refused:
        await tool_api.handle("call_platform_api", {
            "run_id": "run-authz", "caller_plugin_identity": OWNER, "action": "send_message",
            "context_tool": "event_reply", "file_ids": [],
            "params": {"message": [{"type": "image_base64", "image_base64": 5}]}}, None)

    assert refused.value.code == "tool.bad_arguments" and "image_base64" in str(refused.value)


async def test_a_knowledge_call_from_an_unnamed_caller_is_refused(active_run):
    with pytest.raises(HostError) as refused:
        await knowledge_api.document_file("get_knowledge_file_stream",
                                          {"run_id": "run-authz", "storage_path": "kb/x.md"},
                                          None)
    assert refused.value.code == "run.identity_mismatch"


@pytest.fixture
async def installations():
    for name in ("agent-runner-qa", "other"):
        await PluginInstallation.objects.acreate(author="e2e", name=name,
                                                 installation_uuid=f"uuid-{name}")


async def test_a_call_is_named_by_its_installation_as_an_operators_runtime_sends_it(
        active_run, installations):
    named_by_installation = {"installation_uuid": "uuid-agent-runner-qa"}
    answered = await run_api.handle("state_get", {"run_id": "run-authz", "scope": "conversation",
                                                  "key": "k"}, named_by_installation)

    assert answered == {"value": None}
    assert await run_api.calling_plugin({}, named_by_installation) == OWNER
    # Another plugin's installation; a payload naming one plugin from another's connection;
    # an installation LangHost does not know.
    for data, context, calling in (
            ({}, {"installation_uuid": "uuid-other"}, "e2e/other"),
            ({"caller_plugin_identity": "e2e/other"}, named_by_installation, None),
            ({}, {"installation_uuid": "uuid-nobody-knows"}, None)):
        with pytest.raises(HostError) as refused:
            await run_api.handle("state_get", {"run_id": "run-authz", "scope": "conversation",
                                               "key": "k", **data}, context)
        assert refused.value.code == "run.identity_mismatch"
        assert await run_api.calling_plugin(data, context) == calling
