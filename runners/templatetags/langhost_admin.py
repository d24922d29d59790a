"""Template helpers for LangHost's admin pages."""

import uuid

from django import template

from ledger.selectors import conversations as conversation_selectors
from runners.catalogue import tree_diagram
from runners.catalogue.agent_routing import TreeError
from runners.catalogue.trees import build_tree
from runners.models import AgentInstance

register = template.Library()


@register.simple_tag
def run_transcript(run):
    """The transcript entries of a run: the message that started it and what it answered."""
    return conversation_selectors.entries_of_run(run)


@register.simple_tag
def run_agent_tree(run):
    """The agent tree of the run's agent, its answering agent marked; "" for a run of no
    agent, or of an agent whose tree cannot be drawn now."""
    agent = AgentInstance.objects.filter(pk=run.agent_id).select_related(
        "agent_type").first() if run is not None and _uuid(run.agent_id) else None
    if agent is None:
        return ""
    try:
        tree = build_tree(agent.agent_type)
    except TreeError:
        return ""
    return tree_diagram.svg(tree, answering=(run.metadata_json or {}).get("agent_name"))


def _uuid(value: str) -> bool:
    try:
        uuid.UUID(value or "")
    except ValueError:
        return False
    return True
