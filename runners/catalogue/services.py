"""Writes to the agent catalogue, one rule for every door (the API's serializers and the
admin's forms both call these).

`prepare_agent_type` checks and completes a type's fields before anything is saved, so each
door can show its errors on its own fields; `save_agent_type` writes the type and its
sub-agents together.
"""

import copy
import re

from django.core.exceptions import ValidationError
from django.db import transaction

from runners.box import services as box_services
from runners.catalogue import output_schema, runner_config
from runners.catalogue.bindings import WORKFLOW_KINDS
from runners.catalogue.trees import validate_trees
from runners.models import (
    DEFAULT_RUNNER_ID,
    LLM_AGENT_RUNNER_ID,
    WORKFLOW_RUNNER_ID,
    AgentType,
    LLMModel,
    PluginInstallation,
    SubAgent,
)


class CatalogueError(Exception):
    """A write the catalogue refuses: `errors` maps each field to its messages (for
    `runner_config`, each config field to its message)."""

    def __init__(self, errors: dict):
        super().__init__("; ".join(f"{field}: {messages}" for field, messages in errors.items()))
        self.errors = errors


def default_runner(primary_model: str) -> str:
    """The runner of a new type that chose none: a type that names a model thinks with it
    (the built-in LLM agent), any other echoes."""
    return LLM_AGENT_RUNNER_ID if primary_model else DEFAULT_RUNNER_ID


def prepare_agent_type(instance: AgentType | None, changes: dict,
                       sub_agents: list | None = None) -> dict:
    """`changes` to the type `instance` (None: a new type), completed as every door stores
    them: the runner defaulted (`default_runner`), its config checked against the runner's
    schema and sealed (secrets not sent again are kept). The trees the type belongs to, with
    its new name and `sub_agents` (child ids, when they change), must stay valid.

    Raises CatalogueError naming the fields at fault.
    """
    changes = dict(changes)
    if changes.get("kind") in WORKFLOW_KINDS:  # its steps are its sub-agents
        changes["runner_id"] = WORKFLOW_RUNNER_ID
    elif ("kind" in changes and instance is not None and "runner_id" not in changes
          and instance.runner_id == WORKFLOW_RUNNER_ID):  # a workflow no longer
        changes["runner_id"] = default_runner(changes.get("primary_model",
                                                          instance.primary_model) or "")
    if instance is None and not changes.get("runner_id"):
        changes["runner_id"] = default_runner(changes.get("primary_model") or "")
    candidate = copy.copy(instance) if instance is not None else AgentType()
    for field, value in changes.items():
        setattr(candidate, field, value)
    errors = {}
    try:
        validate_trees(candidate, sub_agents)
    except ValidationError as exc:
        errors["sub_agents" if sub_agents is not None else "name"] = exc.messages
    if "runner_config" in changes or "runner_id" in changes:
        runner_id = candidate.runner_id
        config = candidate.runner_config or {}
        schema = runner_config.schema_of(runner_id)
        try:
            runner_config.check(config, schema, runner_id)
        except runner_config.ConfigError as exc:
            errors["runner_config"] = exc.errors
        else:
            changes["runner_config"] = runner_config.sealed(
                config, schema, instance.runner_config if instance is not None else None)
    if changes.get("box_enabled") and (why := box_services.why_no_box()):
        errors["box_enabled"] = [why]
    if "event_plugins" in changes and (why := _event_plugins_problem(changes["event_plugins"])):
        errors["event_plugins"] = [why]
    if changes.get("agent_tools") and (why := _agent_tools_problem(candidate,
                                                                  changes["agent_tools"])):
        errors["agent_tools"] = [why]
    if changes.get("guardrails") and (why := _guardrails_problem(changes["guardrails"])):
        errors["guardrails"] = [why]
    if changes.get("output_schema") is not None and (
            why := output_schema.schema_problem(changes["output_schema"])):
        errors["output_schema"] = [f"The output schema {why}."]
    if errors:
        raise CatalogueError(errors)
    return changes


def _event_plugins_problem(value) -> str | None:
    """Why `event_plugins` cannot be stored: null, or a list of installed plugins' ids."""
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        return 'A list of plugin ids ("author/name"), [] for none, or null for every plugin.'
    known = {installation.plugin_id for installation in PluginInstallation.objects.all()}
    unknown = [name for name in dict.fromkeys(value) if name not in known]
    return f"Unknown plugin(s): {', '.join(unknown)}." if unknown else None


def _agent_tools_problem(agent_type: AgentType, value) -> str | None:
    """Why `agent_tools` cannot be stored: a list of other agent types' ids."""
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return "A list of agent type ids."
    if agent_type.pk is not None and str(agent_type.pk) in value:
        return "An agent type cannot call itself as a tool."
    try:
        known = {str(pk) for pk in AgentType.objects.filter(pk__in=value).values_list(
            "pk", flat=True)}
    except ValidationError:
        known = set()
    unknown = [item for item in value if item not in known]
    return f"Unknown agent type(s): {', '.join(unknown)}." if unknown else None


def _guardrails_problem(value) -> str | None:
    """Why `guardrails` cannot be stored: `{input: [...], output: [...]}`, each a named check
    of `patterns` (regular expressions) or of a registered `model` with its `prompt`."""
    if not isinstance(value, dict) or set(value) - {"input", "output"}:
        return 'An object with "input" and "output" lists of guardrails.'
    for stage, rules in value.items():
        if not isinstance(rules, list):
            return f"{stage}: a list of guardrails."
        for number, rule in enumerate(rules, start=1):
            where = f"{stage}[{number}]"
            if not isinstance(rule, dict) or not isinstance(rule.get("name"), str) \
                    or not rule["name"]:
                return f"{where}: an object with a name."
            if "patterns" in rule:
                patterns = rule["patterns"]
                if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
                    return f"{where}: patterns is a list of regular expressions."
                for pattern in patterns:
                    try:
                        re.compile(pattern)
                    except re.error as exc:
                        return f"{where}: {pattern!r} is no regular expression ({exc})."
            elif not (isinstance(rule.get("model"), str) and isinstance(rule.get("prompt"), str)
                      and LLMModel.objects.filter(name=rule["model"]).exists()):
                return (f"{where}: patterns, or a registered model and the prompt it checks "
                        "with.")
    return None


@transaction.atomic
def save_agent_type(instance: AgentType | None, changes: dict,
                    sub_agents: list | None = None) -> AgentType:
    """Write `changes` (as `prepare_agent_type` returned them) to `instance`, or a new type,
    with its ordered sub-agents when given."""
    agent_type = instance if instance is not None else AgentType()
    for field, value in changes.items():
        setattr(agent_type, field, value)
    agent_type.save()
    if sub_agents is not None:
        set_sub_agents(agent_type, sub_agents)
    return agent_type


def set_sub_agents(agent_type: AgentType, child_ids: list) -> None:
    SubAgent.objects.filter(parent=agent_type).delete()
    SubAgent.objects.bulk_create(
        SubAgent(parent=agent_type, child_id=child_id, position=position)
        for position, child_id in enumerate(child_ids))
