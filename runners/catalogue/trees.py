"""Agent trees from the catalogue: the routing tree of an agent type, and edit validation.

An agent type is the root of its own tree; its `SubAgent` edges (ordered by position) give the
children. A type can sit in several trees (under a different parent in each), so an edit is
checked against every tree it changes: the trees rooted at the edited type and at each of its
ancestors.
"""

from collections import defaultdict, deque

from django.core.exceptions import ValidationError

from runners.catalogue.agent_routing import AgentNode, AgentTree, TreeError
from runners.models import AgentType, SubAgent


def _edges() -> dict:
    """parent id -> ordered child ids, for the whole catalogue (one query)."""
    edges = defaultdict(list)
    rows = SubAgent.objects.order_by("parent_id", "position", "id").values_list("parent_id",
                                                                                 "child_id")
    for parent_id, child_id in rows:
        edges[parent_id].append(child_id)
    return edges


def _edges_below(root) -> dict:
    """parent id -> ordered child ids, for the types reachable from `root` only (a query a
    level: a type without sub-agents, the usual one, costs one indexed query whatever the size
    of the catalogue). An edge back to a type already reached is kept: the tree rejects it."""
    edges = defaultdict(list)
    seen = frontier = {root}
    while frontier:
        rows = SubAgent.objects.filter(parent_id__in=frontier).order_by(
            "parent_id", "position", "id").values_list("parent_id", "child_id")
        frontier = set()
        for parent_id, child_id in rows:
            edges[parent_id].append(child_id)
            if child_id not in seen:
                frontier.add(child_id)
        seen = seen | frontier
    return edges


def _reachable(starts, graph) -> set:
    seen, queue = set(starts), deque(starts)
    while queue:
        for nxt in graph.get(queue.popleft(), ()):
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return seen


def _node(agent_type: AgentType) -> AgentNode:
    return AgentNode(
        name=agent_type.name, kind=agent_type.kind,
        disallow_transfer_to_parent=agent_type.disallow_transfer_to_parent,
        disallow_transfer_to_peers=agent_type.disallow_transfer_to_peers,
        description=agent_type.description, type_id=str(agent_type.pk),
    )


def _nodes(ids, edges, known: dict) -> dict:
    """Node per type id with its children linked (cycles are linked too; AgentTree rejects them)."""
    types = {**{t.pk: t for t in AgentType.objects.filter(pk__in=ids - set(known))}, **known}
    nodes = {pk: _node(t) for pk, t in types.items() if pk in ids}
    for pk, node in nodes.items():
        node.sub_agents = [nodes[child] for child in edges.get(pk, ()) if child in nodes]
    return nodes


def build_tree(agent_type: AgentType) -> AgentTree:
    """The tree rooted at `agent_type`; TreeError when the stored edges make an invalid one."""
    edges = _edges_below(agent_type.pk)
    ids = _reachable([agent_type.pk], edges)
    nodes = _nodes(ids, edges, {agent_type.pk: agent_type})
    return AgentTree(nodes[agent_type.pk])


def validate_trees(agent_type: AgentType, children=None) -> None:
    """Raise ValidationError if `agent_type` (as it is in memory, e.g. renamed) with `children`
    (ordered child type ids; None = its stored ones) would break any tree it belongs to."""
    edges = _edges()
    if children is not None:
        edges[agent_type.pk] = list(children)
    parents_of = defaultdict(list)
    for parent, kids in edges.items():
        for kid in kids:
            parents_of[kid].append(parent)
    roots = _reachable([agent_type.pk], parents_of)  # the type and all its ancestors
    nodes = _nodes(_reachable(roots, edges), edges, {agent_type.pk: agent_type})
    for root in sorted(roots, key=lambda pk: (pk != agent_type.pk, nodes[pk].name)):
        try:
            AgentTree(nodes[root])
        except TreeError as exc:
            raise ValidationError(f"In the agent tree of '{nodes[root].name}': {exc}") from exc
