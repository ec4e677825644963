"""The code a stored result was computed by: `code_fingerprint(modules)`, beside what it was computed from.

A stored evaluation part (metaxlm.evaluation.recipe) was keyed by its inputs only, so a fixed bug went on serving the
part the bug made. Each part is now also keyed by the fingerprint of the code that computes it, and each finished
fine-tuning run records the one it was made by (with the commit); metaxlm.evaluation.recipe says what a change
does to each (docs/evaluation.md: "Stored parts and finished runs").

The fingerprint covers metaxlm's version and the source bytes of the named modules and of every metaxlm module they
import, read from the source (code_modules). Any edit of those files changes it, also one that changes no number (a
comment, an error message): recomputing a part needlessly costs minutes, reusing one a fixed bug made costs a
wrong number. Code outside metaxlm (torch, transformers: their versions are in run_info.json; a config's plugins)
is not in it.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from pathlib import Path

import metaxlm

PACKAGE = Path(metaxlm.__file__).resolve().parent


def _module_file(name: str) -> Path | None:
    """The source file of metaxlm module `name` (a package's __init__.py), None for a name that is none (an
    attribute imported with `from metaxlm.x import y`)."""
    path = PACKAGE.parent.joinpath(*name.split("."))
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else None


def _imported(name: str, source: str, is_package: bool) -> set[str]:
    """The metaxlm names a module's source imports, at module level or inside a function, relative imports
    resolved."""
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            found |= {base} | {f"{base}.{alias.name}" for alias in node.names}
    return {n for n in found if n == "metaxlm" or n.startswith("metaxlm.")}


def _package_modules(init: Path, package: str) -> list[str]:
    return [f"{package}.{child.stem}" for child in sorted(init.parent.iterdir())
            if (child.suffix == ".py" and child.stem != "__init__") or (child / "__init__.py").is_file()]


@functools.cache
def code_modules(*modules: str) -> dict[str, Path]:
    """The metaxlm modules `modules` are made of: themselves and everything they import, directly or not (an import
    inside a function counts), with every module of a package they import by name (the registries import a
    package's modules on first look-up: the task types of metaxlm.finetune.tasks) and the __init__ of each
    enclosing package (it runs on import; its other modules do not)."""
    seen: dict[str, Path] = {}
    todo = list(modules)
    while todo:
        name = todo.pop()
        path = _module_file(name)
        if name in seen or path is None:
            continue
        seen[name] = path
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        for imported in _imported(name, path.read_text(encoding="utf-8"), path.name == "__init__.py"):
            todo.append(imported)
            found = _module_file(imported)
            if imported != "metaxlm" and found is not None and found.name == "__init__.py":
                todo += _package_modules(found, imported)
    return dict(sorted(seen.items()))


@functools.cache
def code_fingerprint(*modules: str) -> str:
    """sha256 (16 hex digits) of metaxlm's version and the source bytes of the modules `modules` are made of
    (code_modules): what a stored result was computed by. Computed once per process (the code that runs is the
    code that was there when it started)."""
    digest = hashlib.sha256(metaxlm.__version__.encode())
    for name, path in code_modules(*modules).items():
        digest.update(f"\0{name}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]
