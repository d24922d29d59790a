"""Which runner answers, with which config and policies: the binding of a run.

The most specific enabled `Binding` row wins: conversation > agent instance > project >
global. An agent with no row at any of those levels runs with the binding its type implies
(`agent:<instance id>`, the type's runner and persona). Two rows at the winning level, or no
binding at all, is a `BindingError` that says so.
"""

import re

from django.db.models import Q

from runners.catalogue import runner_config
from runners.models import AgentInstance, AgentKind, AgentType, Binding, LLMModel
from runners.protocol import SCOPE_PRECEDENCE, AgentBinding


class BindingError(LookupError):
    pass


class StepRefused(LookupError):
    """A workflow's step (or an agent tool) cannot run: its type is gone or not active."""


def to_protocol(binding: Binding) -> AgentBinding:
    return AgentBinding(
        binding_id=binding.binding_id,
        scope={"scope_type": binding.scope_type, "scope_id": binding.scope_id or None},
        runner_id=binding.runner_id,
        runner_config=_named_models_by_id(runner_config.opened(binding.runner_config or {}),
                                          binding.runner_id),
        state_policy=binding.state_policy or {},
        delivery_policy=binding.delivery_policy or {},
        resource_policy=binding.resource_policy or {},
    )


def agent_runner_config(agent_type: AgentType) -> dict:
    """The agent type's persona and models, handed to its runner as config: LangHost's own
    keys, then the runner's declared fields as the type fills them (LangBot's shapes), then
    the type's explicit `runner_config`."""
    config = _langhost_config(agent_type)
    schema = runner_config.schema_of(agent_type.runner_id)
    explicit = runner_config.opened(agent_type.runner_config or {})
    if not schema:
        return {**config, **explicit}
    names = [agent_type.primary_model, *(agent_type.fallback_models or []),
             *runner_config.rerank_model_names(explicit, schema)]
    model_ids = {name: str(pk) for name, pk in LLMModel.objects.filter(
        name__in=[name for name in names if isinstance(name, str) and name]
    ).values_list("name", "pk")}
    config.update(runner_config.filled(agent_type, schema, model_ids))
    config.update(runner_config.with_model_ids(explicit, schema, model_ids))
    return config


def _named_models_by_id(config: dict, runner_id: str) -> dict:
    """A binding's config with the rerank models it names by name named by id, as the runner
    calls them."""
    schema = runner_config.schema_of(runner_id)
    names = runner_config.rerank_model_names(config, schema) if schema else []
    if not names:
        return config
    model_ids = {name: str(pk) for name, pk in LLMModel.objects.filter(
        name__in=names).values_list("name", "pk")}
    return runner_config.with_model_ids(config, schema, model_ids)


def _langhost_config(agent_type: AgentType) -> dict:
    workflow = {"workflow": agent_type.kind, "steps": workflow_steps(agent_type),
                "max_iterations": agent_type.max_iterations,
                "continue_on_step_failure": agent_type.continue_on_step_failure,
                } if agent_type.kind in WORKFLOW_KINDS else {}
    return {**workflow,
        "name": agent_type.name,
        "description": agent_type.description,
        "prompt": agent_type.personality_prompt,
        "model": agent_type.primary_model,
        "fallback_models": agent_type.fallback_models,
        "model_params": agent_type.model_params,
        "mcp_servers": agent_type.mcp_servers,
        "requires_approval": agent_type.tools_requiring_approval,
        "knowledge_bases": agent_type.knowledge_bases,
        "knowledge_retrieval": agent_type.knowledge_retrieval,
        "box": agent_type.box_enabled,
        "box_network": agent_type.box_network,
        "skills": agent_type.skills,
        "expertise": agent_type.expertise,
        "output_schema": agent_type.output_schema,
        "agent_tools": agent_tools(agent_type),
    }


WORKFLOW_KINDS = (AgentKind.SEQUENTIAL, AgentKind.PARALLEL, AgentKind.LOOP)


def agent_tools(agent_type: AgentType) -> list[dict]:
    """The active agent types the type calls as tools (`{agent_type_id, name, tool_name,
    description}`): a type no longer active is not offered."""
    if not agent_type.agent_tools:
        return []
    found = {str(tool.pk): tool for tool in AgentType.objects.filter(
        pk__in=agent_type.agent_tools, is_active=True)}
    return [{"agent_type_id": pk, "name": found[pk].name,
             "tool_name": "ask_" + re.sub(r"[^a-z0-9_]", "_", found[pk].slug.lower()),
             "description": found[pk].description}
            for pk in map(str, agent_type.agent_tools) if pk in found]


def workflow_steps(agent_type: AgentType) -> list[dict]:
    """A workflow type's steps: its sub-agents, in order (`{agent_type_id, name,
    output_key}`)."""
    return [{"agent_type_id": str(link.child_id), "name": link.child.name,
             "output_key": link.child.output_key}
            for link in agent_type.sub_agent_links.select_related("child").order_by("position")]


def step_binding(agent_type_id: str, variables: dict, timeout: float | None,
                 extra_config: dict, parent: AgentBinding) -> AgentBinding:
    """The binding a workflow's step (or an agent called as a tool) runs with: its type's
    runner and config (with `extra_config`), its persona's `{key}`s filled from the
    workflow's state (ADK's templating), and its caller's resource policy: a step may use
    no more than the run it is a step of. StepRefused for a type that is not active."""
    agent_type = AgentType.objects.filter(pk=agent_type_id, is_active=True).first()
    if agent_type is None:
        raise StepRefused(f"agent type {agent_type_id} is not an active agent type")
    config = {**agent_runner_config(agent_type), **extra_config}
    prompt = config.get("prompt") or ""
    for key, value in variables.items():
        prompt = prompt.replace(f"{{{key}}}", value if isinstance(value, str) else str(value))
    binding = AgentBinding(
        binding_id=f"step:{agent_type.pk}", runner_id=agent_type.runner_id,
        runner_config={**config, "prompt": prompt},
        state_policy={"state_scopes": ["actor", "runner"]},
        resource_policy=parent.resource_policy,
        event_plugins=agent_type.event_plugins, guardrails=agent_type.guardrails or None)
    return with_timeout(binding, timeout)


def implied_agent_binding(agent: AgentInstance) -> AgentBinding:
    """The binding an agent runs with when no `Binding` row speaks for it."""
    return AgentBinding(
        binding_id=f"agent:{agent.pk}",
        scope={"scope_type": "agent", "scope_id": str(agent.pk)},
        runner_id=agent.agent_type.runner_id,
        runner_config=agent_runner_config(agent.agent_type),
        state_policy={"state_scopes": ["conversation", "actor", "subject", "runner"]},
        event_plugins=agent.agent_type.event_plugins,
        guardrails=agent.agent_type.guardrails or None,
    )


def resolve(*, agent: AgentInstance | None = None, conversation_id: str | None = None,
            project_id: str | None = None, timeout: float | None = None) -> AgentBinding:
    """The binding for a run of `agent` (or, without an agent, of a project or conversation)."""
    if agent is not None:
        project_id = str(agent.project_id)
    scope_ids = {"conversation": conversation_id, "agent": str(agent.pk) if agent else None,
                 "project": project_id, "global": ""}
    # One query for every scope (usually none has a row), the most specific scope chosen here.
    matches = Q()
    for scope_type, scope_id in scope_ids.items():
        if scope_id is not None:
            matches |= Q(scope_type=scope_type, scope_id=scope_id)
    by_scope: dict[str, list[Binding]] = {}
    for row in Binding.objects.filter(matches, enabled=True).order_by("pk"):
        by_scope.setdefault(row.scope_type, []).append(row)
    binding = None
    for scope_type in SCOPE_PRECEDENCE:
        candidates = by_scope.get(scope_type, [])
        if len(candidates) > 1:
            raise BindingError(
                f"Ambiguous bindings for {scope_type} '{scope_ids[scope_type] or '*'}': "
                f"{candidates[0].binding_id} and {candidates[1].binding_id}; disable one.")
        if candidates:
            binding = to_protocol(candidates[0])
            if agent is not None:  # which plugins hear its runs, its guardrails: its type's
                binding.event_plugins = agent.agent_type.event_plugins
                binding.guardrails = agent.agent_type.guardrails or None
            break
    if binding is None:
        if agent is None:
            raise BindingError("No enabled binding matches this run (conversation, agent, "
                               "project or global).")
        binding = implied_agent_binding(agent)
    return with_timeout(binding, timeout)


def with_timeout(binding: AgentBinding, timeout: float | None) -> AgentBinding:
    if timeout is not None:
        binding.runner_config = {**binding.runner_config, "timeout": timeout}
    return binding
