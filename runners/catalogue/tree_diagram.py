"""An agent tree drawn as SVG: each agent a box (its name, kind, and where it may hand the
turn), each sub-agent below its parent in order, the answering agent of a run marked.

Laid out as a tidy tree: leaves side by side in order, a parent centred over its children.
Only SVG attributes, no inline style or script (the admin's Content-Security-Policy).
"""

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from runners.catalogue.agent_routing import AgentNode, AgentTree
from runners.models import AgentKind

BOX_WIDTH, BOX_HEIGHT = 180, 52
GAP_X, GAP_Y = 24, 44
NAME_CHARS = 24
# How a workflow runs its sub-agents, as its box says.
WORKFLOW_STEPS = {AgentKind.SEQUENTIAL: "steps in order →", AgentKind.PARALLEL: "steps at once ⇉",
                  AgentKind.LOOP: "steps in a loop ↻"}


def transfers(node: AgentNode, is_root: bool) -> str:
    """Where the agent may hand the turn besides its sub-agents, as ADK's rules allow it."""
    if node.kind == AgentKind.WORKFLOW:
        return "workflow: no transfers"
    if node.kind in WORKFLOW_STEPS:
        return WORKFLOW_STEPS[node.kind]
    allowed = []
    if not is_root and not node.disallow_transfer_to_parent:
        allowed.append("parent")
    if not is_root and not node.disallow_transfer_to_peers:
        allowed.append("peers")
    if node.sub_agents:
        allowed.insert(0, "sub-agents")
    return "→ " + ", ".join(allowed) if allowed else "answers itself"


def _layout(node: AgentNode, depth: int, next_slot: list[int], places: dict) -> float:
    if node.sub_agents:
        xs = [_layout(child, depth + 1, next_slot, places) for child in node.sub_agents]
        x = (xs[0] + xs[-1]) / 2
    else:
        x = next_slot[0]
        next_slot[0] += 1
    places[id(node)] = (x, depth)
    return x


def _short(text: str) -> str:
    return text if len(text) <= NAME_CHARS else text[:NAME_CHARS - 1] + "…"


def svg(tree: AgentTree, answering: str | None = None) -> SafeString:
    """The tree as an inline `<svg>`; the agent named `answering`, if any, marked."""
    places: dict[int, tuple[float, int]] = {}
    _layout(tree.root, 0, [0], places)
    nodes = list(_walk(tree.root))
    columns = max(x for x, _ in places.values()) + 1
    depth = max(d for _, d in places.values()) + 1
    width = columns * (BOX_WIDTH + GAP_X) - GAP_X + 2
    height = depth * (BOX_HEIGHT + GAP_Y) - GAP_Y + 2

    def corner(node):
        x, d = places[id(node)]
        return 1 + x * (BOX_WIDTH + GAP_X), 1 + d * (BOX_HEIGHT + GAP_Y)

    parts = []
    for node in nodes:
        px, py = corner(node)
        for child in node.sub_agents:
            cx, cy = corner(child)
            parts.append(f'<line x1="{px + BOX_WIDTH / 2:.0f}" y1="{py + BOX_HEIGHT}" '
                         f'x2="{cx + BOX_WIDTH / 2:.0f}" y2="{cy}" stroke="#888" '
                         f'stroke-width="1.5"/>')
    for node in nodes:
        x, y = corner(node)
        marked = node.name == answering
        parts.append(
            f'<g class="agent-node{" agent-answering" if marked else ""}" '
            f'data-agent="{escape(node.name)}"><title>{escape(node.description or node.name)}'
            f'</title><rect x="{x:.0f}" y="{y}" width="{BOX_WIDTH}" height="{BOX_HEIGHT}" '
            f'rx="6" fill="{"#fff3c4" if marked else "#f4f6f8"}" '
            f'stroke="{"#c28a00" if marked else "#79aec8"}" stroke-width="{2 if marked else 1}"/>'
            f'<text x="{x + 10:.0f}" y="{y + 21}" font-size="13" font-weight="bold" '
            f'fill="#222">{escape(_short(node.name))}</text>'
            f'<text x="{x + 10:.0f}" y="{y + 40}" font-size="11" fill="#555">'
            f'{escape(transfers(node, node is tree.root))}</text></g>')
    return mark_safe(
        f'<svg class="agent-tree" xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" '
        f'height="{height}" viewBox="0 0 {width:.0f} {height}" role="img" '
        f'aria-label="The agent tree of {escape(tree.root.name)}">{"".join(parts)}</svg>')


def _walk(node: AgentNode):
    yield node
    for child in node.sub_agents:
        yield from _walk(child)
