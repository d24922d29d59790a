"""The agent of a tree whose turn it is: its config, its models and the agents it may hand
the conversation to (`transfer_to_agent`), as the built-in agent reads them."""

import json

from asgiref.sync import sync_to_async

from runners.catalogue.agent_routing import (
    TRANSFER_TOOL,
    find_agent,
    transfer_targets,
)
from runners.catalogue.bindings import agent_runner_config
from runners.catalogue.trees import build_tree
from runners.models import AgentInstance, AgentType, LLMModel
from runners.providers.errors import ProviderError
from runners.providers.lookup import load_models


def transfer_tool(targets: list[dict]) -> dict:
    return {
        "name": TRANSFER_TOOL,
        "description": "Hand the conversation to another agent who is better placed to "
                       "answer. " + " ".join(f"{target['name']}: "
                                              f"{target.get('description') or 'an agent'}."
                                              for target in targets),
        "parameters": {"type": "object", "required": ["agent_name"], "properties": {
            "agent_name": {"type": "string", "enum": [target["name"] for target in targets]}}},
    }


class Turn:
    """One agent answering: its config, its models and the agents it may hand over to."""

    def __init__(self, config: dict, models: list[LLMModel]):
        self.config = config
        self.models = models
        self.targets = [target for target in config.get("transfer_targets") or []
                        if isinstance(target, dict) and target.get("name")]


async def turn_for(config: dict) -> Turn:
    names = [config.get("model"), *(config.get("fallback_models") or [])]
    names = [name for name in names if isinstance(name, str) and name]
    if not names:
        raise ProviderError(f"model.unknown: agent '{config.get('name')}' names no model; set "
                            "its primary_model")
    models = await load_models(names)
    known = {model.name for model in models}
    missing = [name for name in names if name not in known]
    if missing:
        raise ProviderError(
            f"model.unknown: {', '.join(repr(name) for name in missing)} is not a registered "
            "active model; add it in the admin (LLM models) or with POST /api/v1/models")
    return Turn(config, models)


async def handed_over(agent_id: str, name: str) -> Turn:
    """The turn of the agent `name` of the instance's tree, which the turn was handed to."""
    agent = await AgentInstance.objects.select_related("agent_type").aget(pk=agent_id)
    tree = await sync_to_async(build_tree)(agent.agent_type)
    node = find_agent(tree.root, name)
    config = agent_runner_config(await AgentType.objects.aget(pk=node.type_id))
    config["transfer_targets"] = [{"name": target.name, "description": target.description}
                                  for target in transfer_targets(tree, node)]
    return await turn_for(config)


def _requested(entry: dict) -> str | None:
    try:
        args = json.loads(entry["arguments"] or "{}")
    except ValueError:
        return None
    name = args.get("agent_name") if isinstance(args, dict) else None
    return name if isinstance(name, str) else None


def transfer_target(turn: Turn, calls: dict) -> tuple[str, dict] | None:
    """The model's `transfer_to_agent` call naming an agent it may hand over to (named as
    people write names: another case, spaces around), with that agent's name."""
    allowed = {" ".join(target["name"].split()).casefold(): target["name"]
               for target in turn.targets}
    for call_id, entry in calls.items():
        if entry["name"] != TRANSFER_TOOL:
            continue
        name = allowed.get(" ".join((_requested(entry) or "").split()).casefold())
        if name is not None:
            return call_id, {"agent_name": name}
    return None


def unknown_transfer(turn: Turn, calls: dict) -> str | None:
    """Why the model's `transfer_to_agent` call cannot be followed, when it made one and it
    names no agent the turn may hand over to."""
    for entry in calls.values():
        if entry["name"] == TRANSFER_TOOL:
            offered = ", ".join(target["name"] for target in turn.targets) or "none"
            return (f"the model handed the turn to {_requested(entry)!r}, which is no agent it "
                    f"may transfer to (those it may: {offered})")
    return None
