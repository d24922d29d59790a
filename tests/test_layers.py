"""The code's imports form no circle, wherever they stand (module level, inside a function,
under TYPE_CHECKING), and what acts on a run from outside the engine reaches it only through
its handle: nothing below the engine imports the orchestrator."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APPS = ("runners", "ledger", "accounts", "langhost")
# The layers below the engine: they may act on a run only through its handle.
BELOW_THE_ENGINE = ("runners.hostapi", "runners.providers", "runners.tools", "runners.runtime",
                    "runners.agent.builtins", "runners.agent.llm_agent", "ledger")
ORCHESTRATOR = "runners.execution.orchestrator"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_sources() -> dict[str, str]:
    """Every module of the apps but their tests and migrations: name → source."""
    sources = {}
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            if {"tests", "migrations"} & set(path.relative_to(ROOT).parts):
                continue
            sources[module_name(path)] = path.read_text()
    return sources


def imports(source: str, modules: set[str]) -> set[str]:
    """The modules of `modules` that `source` imports anywhere in its body."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            # `from package import module` imports the module; `from module import name`,
            # the module.
            names = [f"{node.module}.{alias.name}" for alias in node.names
                     if f"{node.module}.{alias.name}" in modules] or [node.module]
        else:
            continue
        found.update(name for name in names if name in modules)
    return found


def import_graph(sources: dict[str, str]) -> dict[str, set[str]]:
    modules = set(sources)
    return {name: imports(source, modules) - {name} for name, source in sources.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


# Read when the tests are collected, before any test runs: CPython 3.11.7's `ast.parse` can
# fail on any source once a test has left its interpreter-wide recursion counter off.
SOURCES = project_sources()
GRAPH = import_graph(SOURCES)
ADDED_BACK = {
    # A function-level import: how the process used to reach the orchestrator to cancel.
    "function level": "\n\ndef later():\n"
                      "    from runners.execution.orchestrator import Orchestrator\n",
    # One only a type checker would follow.
    "TYPE_CHECKING": "\n\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                     "    from runners.execution.orchestrator import Orchestrator\n",
}
ADDED_BACK_GRAPHS = {
    name: import_graph({**SOURCES, "runners.runtime.host_process":
                        SOURCES["runners.runtime.host_process"] + added})
    for name, added in ADDED_BACK.items()
}


def test_no_import_cycle_anywhere_in_the_apps():
    assert cycles(GRAPH) == []


@pytest.mark.parametrize("added", ADDED_BACK)
def test_an_import_cycle_added_back_is_found(added):
    found = cycles(ADDED_BACK_GRAPHS[added])

    assert any({"runners.runtime.host_process", ORCHESTRATOR} <= set(group) for group in found)


def test_nothing_below_the_engine_imports_the_orchestrator():
    importers = sorted(name for name, targets in GRAPH.items()
                       if ORCHESTRATOR in targets and name.startswith(BELOW_THE_ENGINE))

    assert importers == []
    assert GRAPH["runners.hostapi.run_api"], "the scan reads the host API's imports"
