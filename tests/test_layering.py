"""The package's layering, read from the source (docs/architecture.md draws it): every import, at module level or
inside a function, goes down the pipeline — data → vocabulary → models → transfer → pretraining → fine-tuning /
probes → evaluation → report → pipeline → CLI, foundations below all — and no chain of imports comes back to where
it started, so no function-level import is there to hide a loop."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "metaxlm"

# rank of each top-level module or package of metaxlm; an import must go to a lower rank (foundations, rank 0, may
# import each other)
FOUNDATIONS = ("config", "errors", "io", "languages", "metrics", "records", "registry", "roots", "run", "seeds",
               "textpolicy")
RANK = {**dict.fromkeys(FOUNDATIONS, 0),
        "packaged": 0,  # the configs shipped in the package, found by name (errors only)
        "data": 1, "compute": 1, "alignment": 1,
        "vocab": 2,
        "models": 3,
        "transfer": 4,
        "pretrain": 5, "finetune": 5, "features": 5,
        "evaluation": 6,
        "config_reference": 6.5,  # documents the run config and the task config (finetune.spec)
        "report": 7,
        "pipeline": 8, "plan": 8.2,  # plan: what a run will do, from the pipeline's own reuse checks
        "cli_models": 8.5, "cli_plan": 8.5,  # cli.py adds their commands (`model`, `veco`; `plan`, `status`, `list`)
        "cli_configs": 8.5,  # and `configs list|copy|reference`
        "cli": 9, "launch": 9, "check_gpu": 9, "__main__": 10, "__init__": 0}
# downward imports that would still make the flow run backwards
FORBIDDEN = {("evaluation", "pretrain"): "evaluation only reads what pretraining exported (exports.json, start_model/)"}


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports(name: str) -> list[tuple[str, int, bool]]:
    """(imported metaxlm module, line, inside a function?) of every import statement of module `name` (type-checking
    blocks left out: they never run)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, ast.Import):
                found.extend((a.name, child.lineno, in_function) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[:len(package.split(".")) - (child.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                for alias in child.names:  # `from pkg import module` imports the module, else the package
                    target = f"{base}.{alias.name}"
                    found.append((target if target in MODULES else base, child.lineno, in_function))
            visit(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef))

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return [(t, line, f) for t, line, f in found if t in MODULES and t != name]


def top(name: str) -> str:
    """The layer a module belongs to: its top-level module or package."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_module_has_a_layer():
    assert {top(name) for name in MODULES} <= set(RANK), "a new top-level module: give it a rank here and a place " \
                                                         "in docs/architecture.md"


def test_imports_only_go_down_the_layers():
    upward = [f"{MODULES[name].relative_to(SRC)}:{line} imports {target} ({top(name)} {RANK[top(name)]} -> "
              f"{top(target)} {RANK[top(target)]})"
              for name in MODULES for target, line, _ in imports(name)
              if top(target) != top(name) and top(name) != "__init__"
              and not (RANK[top(target)] < RANK[top(name)] or RANK[top(target)] == RANK[top(name)] == 0)]
    assert not upward, "\n".join(upward)
    backwards = [f"{MODULES[name].relative_to(SRC)}:{line} imports {target}: {FORBIDDEN[top(name), top(target)]}"
                 for name in MODULES for target, line, _ in imports(name) if (top(name), top(target)) in FORBIDDEN]
    assert not backwards, "\n".join(backwards)


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of more than one node that reach each other (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    loops: list[list[str]] = []

    def connect(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                loops.append(sorted(component))

    for name in graph:
        if name not in index:
            connect(name)
    return loops


def test_no_import_loop_even_through_function_level_imports():
    assert not strongly_connected({name: {t for t, _, _ in imports(name)} for name in MODULES})


def test_no_loop_between_packages():
    """Foundations may import each other, but not in a circle: `io` and the `run/` package, say, one way only."""
    graph: dict[str, set[str]] = {}
    for name in MODULES:
        graph.setdefault(top(name), set()).update(top(t) for t, _, _ in imports(name) if top(t) != top(name))
    for targets in list(graph.values()):
        for t in targets:
            graph.setdefault(t, set())
    assert not strongly_connected(graph)
