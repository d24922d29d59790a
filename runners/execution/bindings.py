"""Binding resolution: the most specific enabled binding answers (conversation > agent >
project > global); none, or two at the same level, is an error that says so."""

from asgiref.sync import sync_to_async

from runners.execution.protocol import SCOPE_PRECEDENCE, AgentBinding, AgentEventEnvelope
from runners.models import Binding


class BindingError(LookupError):
    pass


def to_protocol(binding: Binding) -> AgentBinding:
    return AgentBinding(
        binding_id=binding.binding_id,
        scope={"scope_type": binding.scope_type, "scope_id": binding.scope_id or None},
        runner_id=binding.runner_id,
        runner_config=binding.runner_config or {},
        state_policy=binding.state_policy or {},
        delivery_policy=binding.delivery_policy or {},
        resource_policy=binding.resource_policy or {},
    )


def resolve_sync(event: AgentEventEnvelope) -> AgentBinding:
    scope_ids = {
        "conversation": event.conversation_id,
        "agent": event.agent_id,
        "project": event.project_id,
        "global": "",
    }
    for scope_type in SCOPE_PRECEDENCE:
        scope_id = scope_ids[scope_type]
        if scope_id is None:
            continue
        candidates = list(
            Binding.objects.filter(enabled=True, scope_type=scope_type, scope_id=scope_id)[:2]
        )
        if len(candidates) > 1:
            raise BindingError(
                f"Ambiguous bindings for {scope_type} '{scope_id or '*'}': "
                f"{candidates[0].binding_id} and {candidates[1].binding_id}; disable one."
            )
        if candidates:
            return to_protocol(candidates[0])
    raise BindingError("No enabled binding matches this event (conversation, agent, project or global).")


resolve = sync_to_async(resolve_sync)
