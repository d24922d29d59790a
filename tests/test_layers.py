"""The house's layers, enforced: `LAYERS` is the order `docs/architecture.md` draws, top to
bottom, and no module imports one of a higher layer; imports form no circle, wherever they
stand (module level, inside a function, under TYPE_CHECKING); no project code is imported by
name at run time (`importlib`, `__import__`), which no scan would see; no module passes 500
lines, and no function of the run path 80; the ledger is read through its selectors."""

import ast
import functools
import gc
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APPS = ("runners", "ledger", "accounts", "langhost")
ORCHESTRATOR = "runners.execution.orchestrator"
ARCHITECTURE = ROOT / "docs" / "architecture.md"

# Top to bottom. A module belongs to the layer of its longest matching package; a module that
# serves requests (an app's `api/`, `admin`, `management/`, `views`, `templatetags/`) is an
# edge, wherever its app stands, unless a layer names it (`serve` runs the project's ASGI
# application).
LAYERS = (
    ("project", ("langhost", "runners.routing", "runners.apps",
                 "runners.management.commands.serve")),
    ("edges", ("runners.api", "runners.ws", "runners.admin", "runners.management",
               "runners.templatetags", "runners.evals")),
    ("work", ("runners.work", "runners.schedules")),
    ("door", ("runners.conversations",)),
    ("engine", ("runners.execution",)),
    ("plugins", ("runners.plugins",)),
    ("host-api", ("runners.hostapi",)),
    ("agent", ("runners.agent",)),
    ("grants", ("runners.grants",)),
    ("capabilities", ("runners.catalogue", "runners.knowledge", "runners.skills", "runners.box",
                      "runners.tools", "runners.webhooks", "runners.safety")),
    ("transport", ("runners.runtime", "runners.providers")),
    ("observability", ("runners.observability",)),
    ("vocabulary", ("runners.protocol",)),
    ("models", ("runners.models",)),
    ("accounts", ("accounts",)),
    ("ledger", ("ledger",)),
    ("base", ("langhost.base",)),
)
EDGE_PARTS = {"api", "admin", "management", "views", "templatetags"}
MAX_MODULE_LINES = 500
MAX_RUN_PATH_FUNCTION_LINES = 80
RUN_PATH = ("runners.conversations", "runners.execution", "runners.hostapi", "runners.agent")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> int | None:
    """The index in `LAYERS` of the module's layer (0 is the top), None when it has none."""
    parts = module.split(".")
    matches = [(package.count(".") + 1, index) for index, (_, packages) in enumerate(LAYERS)
               for package in packages if module == package or module.startswith(package + ".")]
    matched, layer = max(matches) if matches else (0, None)
    edge_at = [at for at, part in enumerate(parts) if part in EDGE_PARTS and at > 0]
    if parts[0] != "langhost" and edge_at and edge_at[0] >= matched:
        return 1
    return layer


@functools.cache
def parse(source: str) -> ast.Module:
    """`ast.parse`, once per source, with the garbage collector held off: CPython 3.11 fails
    a parse ("AST constructor recursion depth mismatch") when a finalizer collected inside
    it reports an error, since formatting that traceback parses too."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(source)
    finally:
        if collecting:
            gc.enable()


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
    for node in ast.walk(parse(source)):
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


@functools.cache
def sources() -> dict[str, str]:
    return project_sources()


@functools.cache
def graph() -> dict[str, set[str]]:
    return import_graph(sources())


ADDED_BACK = {
    # A function-level import: how the process used to reach the orchestrator to cancel.
    "function level": "\n\ndef later():\n"
                      "    from runners.execution.orchestrator import Orchestrator\n",
    # One only a type checker would follow.
    "TYPE_CHECKING": "\n\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                     "    from runners.execution.orchestrator import Orchestrator\n",
}


def test_no_import_cycle_anywhere_in_the_apps():
    assert cycles(graph()) == []


@pytest.mark.parametrize("added", ADDED_BACK)
def test_an_import_cycle_added_back_is_found(added):
    host_process = "runners.runtime.host_process"
    changed = {**sources(), host_process: sources()[host_process] + ADDED_BACK[added]}

    found = cycles(import_graph(changed))

    assert any({"runners.runtime.host_process", ORCHESTRATOR} <= set(group) for group in found)


def upward(graph: dict[str, set[str]]) -> list[str]:
    """Each import of a module of a higher layer, as `importer -> imported`."""
    return sorted(f"{name} -> {target}" for name, targets in graph.items() for target in targets
                  if layer_of(name) is not None and layer_of(target) is not None
                  and layer_of(target) < layer_of(name))


def test_every_module_stands_in_a_layer():
    assert sorted(name for name, source in sources().items()
                  if source.strip() and layer_of(name) is None) == []


def test_no_import_points_up():
    assert upward(graph()) == []
    assert graph()["runners.hostapi.run_api"], "the scan reads the host API's imports"


# The imports that pointed up on main `3518118`, each from its module then to its module then:
# a module that moved since is put back where it stood.
EDGES_ONCE_UP = (
    ("runners.hostapi.model_api", "runners.execution.context"),
    ("runners.hostapi.model_api", "runners.execution.grants"),
    ("runners.hostapi.tool_api", "runners.execution.tool_calls"),
    ("runners.hostapi.tool_api", "runners.execution.reply_files"),
    ("runners.hostapi.tool_api", "runners.execution.tool_grants"),
    ("runners.plugins.gateway", "runners.execution.registry"),
    ("runners.plugins.gateway", "runners.execution.tool_registry"),
    ("runners.plugins.install", "runners.execution.registry"),
    ("runners.knowledge.grants", "runners.execution.protocol"),
    ("runners.skills.grants", "runners.execution.protocol"),
    ("runners.conversations.work", "runners.schedules.services"),
)


@pytest.mark.parametrize(("importer", "imported"), EDGES_ONCE_UP,
                         ids=[f"{a}->{b}" for a, b in EDGES_ONCE_UP])
def test_an_upward_import_added_back_is_found(importer, imported):
    changed = {imported: "", **sources()}
    changed[importer] = changed.get(importer, "") + f"\nimport {imported}\n"

    assert upward(import_graph(changed)) == [f"{importer} -> {imported}"]


def dynamic_imports(source: str) -> list[str]:
    """What `source` imports by name at run time: each `import_module(...)`, `__import__(...)`
    or `import_string(...)` call's first argument as written."""
    found = []
    for node in ast.walk(parse(source)):
        if isinstance(node, ast.Call) and node.args:
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(
                node.func, "id", None)
            if called in {"import_module", "__import__", "import_string"}:
                found.append(ast.unparse(node.args[0]))
    return found


def project_code_named(argument: str) -> bool:
    """Whether an argument may name project code: a literal of one of the apps, or anything
    not a literal (what it names is known only when it runs)."""
    try:
        named = ast.literal_eval(argument)
    except ValueError:
        return True
    return isinstance(named, str) and named.split(".")[0] in APPS


def test_no_project_code_is_imported_by_name():
    # Django loads what the settings name by string; so does `langhost.checks`, which reads
    # the settings' classes back to check them.
    allowed = {("accounts.authentication", "settings.SESSION_ENGINE"),
               ("langhost.checks", "path")}
    found = sorted((name, argument) for name, source in sources().items()
                   for argument in dynamic_imports(source)
                   if project_code_named(argument) and (name, argument) not in allowed)

    assert found == []


def test_a_dynamic_import_of_project_code_added_back_is_found():
    added = sources()["runners.providers"] + (
        "\n\ndef calls():\n    return importlib.import_module('runners.providers.calls')\n")

    assert [project_code_named(argument) for argument in dynamic_imports(added)] == [True]



def test_no_module_passes_500_lines():
    long = sorted(f"{name}: {len(source.splitlines())}" for name, source in sources().items()
                  if len(source.splitlines()) > MAX_MODULE_LINES)

    assert long == []


def long_functions(source: str, limit: int) -> list[str]:
    return [f"{node.name}: {node.end_lineno - node.lineno + 1}"
            for node in ast.walk(parse(source))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.end_lineno - node.lineno + 1 > limit]


def test_no_function_of_the_run_path_passes_80_lines():
    long = sorted(f"{name}.{function}" for name, source in sources().items()
                  if name.startswith(RUN_PATH)
                  for function in long_functions(source, MAX_RUN_PATH_FUNCTION_LINES))

    assert long == []


def test_a_long_function_added_is_found():
    body = "".join(f"    x{index} = {index}\n" for index in range(MAX_RUN_PATH_FUNCTION_LINES))

    assert long_functions(f"def run():\n{body}", MAX_RUN_PATH_FUNCTION_LINES) == ["run: 81"]


def drawn_layers() -> list[tuple[str, tuple[str, ...]]]:
    """The layers `docs/architecture.md` draws under "## Layers": each line of its first
    picture is a layer's name, then its packages as paths."""
    text = ARCHITECTURE.read_text().split("## Layers", 1)[1]
    picture = text.split("```", 2)[1]
    drawn = []
    for line in picture.strip().splitlines():
        name, *words = line.split()
        paths = [word for word in words if word.endswith(("/", ".py"))]
        drawn.append((name, tuple(path.removesuffix("/").removesuffix(".py").replace("/", ".")
                                  for path in paths)))
    return drawn


def test_the_architecture_draws_the_layers_this_test_holds():
    assert drawn_layers() == [(name, packages) for name, packages in LAYERS]


@functools.cache
def ledger_models() -> list[str]:
    return sorted(
        node.name for name, source in sources().items() if name.startswith("ledger.models.")
        for node in parse(source).body
        if isinstance(node, ast.ClassDef) and any(ast.unparse(base) == "models.Model"
                                                  for base in node.bases))


def ledger_reads(source: str) -> list[str]:
    """Each `<ledger model>.objects...` or `get_object_or_404(<ledger model>, ...)` in
    `source`, but an empty queryset (`.none()`, which schema generation asks of a view)."""
    found, nones = [], []
    for node in ast.walk(parse(source)):
        if (isinstance(node, ast.Attribute) and node.attr == "objects"
                and isinstance(node.value, ast.Name) and node.value.id in ledger_models()):
            found.append(node.value.id)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "none" and ast.unparse(node.func.value).endswith(".objects")
              and ast.unparse(node.func.value).removesuffix(".objects") in ledger_models()):
            nones.append(ast.unparse(node.func.value).removesuffix(".objects"))
        elif (isinstance(node, ast.Call) and getattr(node.func, "id", None) in {
                "get_object_or_404", "get_list_or_404", "aget_object_or_404"}
              and node.args and isinstance(node.args[0], ast.Name)
              and node.args[0].id in ledger_models()):
            found.append(node.args[0].id)
    for model in nones:
        found.remove(model)
    return found


def test_the_ledger_is_read_through_its_selectors():
    assert "AgentRun" in ledger_models() and "Transcript" in ledger_models()
    outside = sorted(f"{name}: {model}" for name, source in sources().items()
                     if not name.startswith("ledger")
                     for model in ledger_reads(source))

    assert outside == []


def test_a_ledger_read_added_outside_the_ledger_is_found():
    added = "def busy(agent_id):\n    return AgentRun.objects.filter(agent_id=agent_id).exists()\n"

    assert ledger_reads(added) == ["AgentRun"]
    assert ledger_reads("def page(run_id):\n    return get_object_or_404(AgentRun, run_id=run_id)\n"
                        ) == ["AgentRun"]
    assert ledger_reads("def none():\n    return AgentRun.objects.none()\n") == []
