"""Agent-tree routing: which agent of a tree answers the next message.

Pure functions over a tree value and a conversation history, following the ADK Go runner's
agent-tree semantics (agents, transferability, routing). Nothing here touches the database:
`runners.catalogue.trees` builds the tree from agent types and `runners.conversations.services`
builds the history from the conversation's transcript entries.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)

LLM = "llm"
WORKFLOW = "workflow"
USER_AUTHOR = "user"
# The tool that hands a turn to another agent of the tree.
TRANSFER_TOOL = "transfer_to_agent"


class TreeError(ValueError):
    """The tree cannot be built: a cycle, an agent under two parents, or a duplicate name."""


@dataclass(eq=False)
class AgentNode:
    """One agent of a tree. Identity is the object itself; names are unique per tree."""

    name: str
    kind: str = LLM
    disallow_transfer_to_parent: bool = False
    disallow_transfer_to_peers: bool = False
    sub_agents: list[AgentNode] = field(default_factory=list)
    description: str = ""
    type_id: str | None = None  # the AgentType this node was built from, if any

    def __repr__(self) -> str:
        return f"AgentNode({self.name!r}, kind={self.kind!r})"


class AgentTree:
    """A root and the parent map (child name -> parent node) built by one walk.

    Rejected like ADK's construction: the same node under two parents (a cycle included),
    or a name used twice anywhere in the tree (the root's name included).
    """

    def __init__(self, root: AgentNode | None):
        self.root = root
        self.parents: dict[str, AgentNode | None] = {}
        if root is not None:
            self._walk(root, None, [], {})

    def _walk(self, node: AgentNode, parent: AgentNode | None, path: list[AgentNode],
              seen: dict[int, AgentNode | None]) -> None:
        if any(node is ancestor for ancestor in path):
            cycle = " → ".join(a.name for a in [*path[path.index(node):], node])
            raise TreeError(f"Agent '{node.name}' is its own ancestor (cycle: {cycle}).")
        if id(node) in seen:
            first = seen[id(node)]
            raise TreeError(
                f"Agent '{node.name}' is under two parents "
                f"('{first.name if first else '-'}' and '{parent.name if parent else '-'}')."
            )
        if node.name in self.parents:
            raise TreeError(
                f"Two agents are named '{node.name}'; names must be unique within a tree."
            )
        seen[id(node)] = parent
        self.parents[node.name] = parent
        path.append(node)
        for child in node.sub_agents:
            self._walk(child, node, path, seen)
        path.pop()

    def parent_of(self, agent: AgentNode) -> AgentNode | None:
        return self.parents.get(agent.name)

    def __iter__(self):
        """Every node, depth-first pre-order."""
        stack = [self.root] if self.root is not None else []
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.sub_agents))


def find_agent(root: AgentNode | None, name: str) -> AgentNode | None:
    """Depth-first, pre-order, `root` included. Unknown name or empty tree -> None."""
    if root is None:
        return None
    if root.name == name:
        return root
    return find_sub_agent(root, name)


def find_sub_agent(agent: AgentNode | None, name: str) -> AgentNode | None:
    """Like `find_agent`, descendants only."""
    if agent is None:
        return None
    for child in agent.sub_agents:
        found = find_agent(child, name)
        if found is not None:
            return found
    return None


def is_transferable(tree: AgentTree, agent: AgentNode) -> bool:
    """Could the conversation climb from `agent` back to the root through transfers?

    Walks from the agent up: any node that is not an LLM agent, or that disallows transfer to
    its parent, makes it False; passing the root makes it True. `disallow_transfer_to_peers`
    plays no part here.
    """
    current: AgentNode | None = agent
    while current is not None:
        if current.kind != LLM or current.disallow_transfer_to_parent:
            return False
        current = tree.parent_of(current)
    return True


@dataclass(frozen=True)
class Entry:
    """What routing reads from one conversation entry (or from the incoming message)."""

    author: str
    function_calls: tuple[str, ...] = ()
    function_responses: tuple[str, ...] = ()


def find_agent_to_run(tree: AgentTree, history: Sequence[Entry],
                      message: Entry | None = None) -> AgentNode | None:
    """The agent that answers `message`, given the stored history (oldest first).

    1. The message answers a function call: the agent that made the call, whatever its flags.
    2. Otherwise the newest entry by a known, transferable agent (user entries and unknown
       authors are skipped; unknown ones are logged).
    3. Otherwise the root. Never raises; None only for an empty tree.
    """
    if history and message is not None and message.function_responses:
        call_id = message.function_responses[0]
        for entry in reversed(history):
            if call_id in entry.function_calls:
                caller = find_agent(tree.root, entry.author)
                if caller is not None:
                    return caller
                logger.warning("Function call from an unknown agent: %r", entry.author)
                break
    for entry in reversed(history):
        if entry.author == USER_AUTHOR:
            continue
        agent = find_agent(tree.root, entry.author)
        if agent is None:
            logger.warning("Event from an unknown agent: %r", entry.author)
            continue
        if is_transferable(tree, agent):
            return agent
    return tree.root


def transfer_targets(tree: AgentTree, agent: AgentNode) -> list[AgentNode]:
    """The agents `agent` may hand the turn to with `transfer_to_agent`, in the order offered.

    Sub-agents always; the parent if `agent` allows transfer to its parent and the parent is an
    LLM agent; siblings if `agent` allows peer transfer and the parent runs auto-flow (it has
    sub-agents, which it does: `agent` is one).
    """
    targets = list(agent.sub_agents)
    parent = tree.parent_of(agent)
    if parent is None:
        return targets
    if not agent.disallow_transfer_to_parent and parent.kind == LLM:
        targets.append(parent)
    if not agent.disallow_transfer_to_peers:
        targets.extend(peer for peer in parent.sub_agents if peer is not agent)
    return targets
