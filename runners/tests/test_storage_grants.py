"""A run's storage grants, each from what the runner asks and what the binding allows: its
plugin's storage only when both say so; workspace storage, which LangHost does not keep, never."""

import pytest

from runners.execution.context import available_apis, build_context
from runners.models import RunnerDescriptor
from runners.protocol import AgentBinding, AgentEventEnvelope


def storage_of(asked: list[str], **policy) -> dict:
    descriptor = RunnerDescriptor(id="plugin:e2e/agent/store", runner_name="store",
                                  permissions={"storage": asked})
    binding = AgentBinding(binding_id="store", runner_id=descriptor.id, resource_policy=policy)
    event = AgentEventEnvelope(input={"text": "hi"})
    apis = available_apis(event, binding, descriptor)
    context = build_context(run_id="run-store", event=event, binding=binding, apis=apis,
                            state={}, deadline_at=None)
    return {"api": apis["storage"], **context["resources"]["storage"]}


@pytest.mark.parametrize(("asked", "policy", "expected"), [
    (["plugin"], {}, {"api": True, "plugin_storage": True, "workspace_storage": False}),
    (["plugin"], {"allow_plugin_storage": False},
     {"api": False, "plugin_storage": False, "workspace_storage": False}),
    (["workspace"], {"allow_workspace_storage": True},
     {"api": False, "plugin_storage": False, "workspace_storage": False}),
    (["plugin", "workspace"], {"allow_workspace_storage": True},
     {"api": True, "plugin_storage": True, "workspace_storage": False}),
])
def test_each_storage_is_granted_only_where_the_runner_asks_and_the_policy_allows(
        asked, policy, expected):
    assert storage_of(asked, **policy) == expected
