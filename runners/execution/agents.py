"""How an agent instance runs: the binding its type implies, and the event its input makes."""

from runners.execution.bindings import to_protocol
from runners.execution.protocol import AgentBinding, AgentEventEnvelope
from runners.models import AgentInstance, Binding


def agent_runner_config(agent_type) -> dict:
    """The agent type's persona and models, handed to its runner as config."""
    return {
        "prompt": agent_type.personality_prompt,
        "model": agent_type.primary_model,
        "fallback_models": agent_type.fallback_models,
        "model_params": agent_type.model_params,
        "mcp_servers": agent_type.mcp_servers,
        "expertise": agent_type.expertise,
    }


def agent_binding_sync(agent: AgentInstance, timeout: float | None = None) -> AgentBinding:
    """An enabled agent-scope binding wins; otherwise the agent type decides the runner."""
    stored = Binding.objects.filter(enabled=True, scope_type="agent", scope_id=str(agent.pk)).first()
    if stored is not None:
        binding = to_protocol(stored)
    else:
        binding = AgentBinding(
            binding_id=f"agent:{agent.pk}",
            scope={"scope_type": "agent", "scope_id": str(agent.pk)},
            runner_id=agent.agent_type.runner_id,
            runner_config=agent_runner_config(agent.agent_type),
            state_policy={"state_scopes": ["conversation", "actor", "subject", "runner"]},
        )
    if timeout is not None:
        binding.runner_config = {**binding.runner_config, "timeout": timeout}
    return binding


def user_event(user, **fields) -> AgentEventEnvelope:
    """An API event acted by a signed-in user."""
    return AgentEventEnvelope(
        actor={"actor_type": "user", "actor_id": str(user.pk), "actor_name": user.email},
        **{key: value for key, value in fields.items() if value is not None},
    )
