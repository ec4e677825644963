"""One registry convention for everything chosen by name in a config: objectives, batch sources, models,
fine-tuning tasks. A new kind of thing is one new file that decorates its class with `@REGISTRY.register("name")`;
an unknown name is a `ConfigError` that lists the registered names (fairseq's convention)."""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable
from typing import Generic, TypeVar

from metaxlm.errors import ConfigError

T = TypeVar("T")
DESCRIPTION_WIDTH = 100  # characters of a one-line description (`metaxlm list`)


class Registry(Generic[T]):
    """Name → class. `package`: a package whose modules are imported on first look-up, so a new file in it
    registers itself without being listed anywhere."""

    def __init__(self, kind: str, package: str | None = None):
        self.kind, self.package = kind, package
        self._entries: dict[str, T] = {}
        self._imported = package is None
        self.base: type | None = None

    def require(self, base: type) -> None:
        """Every entry must subclass `base` (its layer's base class, which declares what an entry has: its
        `Options` among them); called by the module that defines the base."""
        self.base = base

    def register(self, name: str) -> Callable[[T], T]:
        def deco(cls: T) -> T:
            if self.base is not None and not (isinstance(cls, type) and issubclass(cls, self.base)):
                raise TypeError(f"{self.kind} {name!r}: {cls!r} is not a subclass of {self.base.__name__}")
            known = self._entries.get(name)
            if known is not None and known is not cls:
                raise ValueError(f"{self.kind} {name!r} is registered twice ({known.__name__}, {cls.__name__})")
            cls.name = name
            self._entries[name] = cls
            return cls

        return deco

    def _import_package(self) -> None:
        if self._imported:
            return
        self._imported = True
        pkg = importlib.import_module(self.package)
        for module in pkgutil.iter_modules(pkg.__path__):
            if not module.name.startswith("_"):
                importlib.import_module(f"{self.package}.{module.name}")

    def get(self, name: str, where: str | None = None) -> T:
        self._import_package()
        if name not in self._entries:
            at = f"{where}: " if where else ""
            raise ConfigError(f"{at}unknown {self.kind} {name!r} (registered: {', '.join(self.names())})")
        return self._entries[name]

    def names(self) -> list[str]:
        self._import_package()
        return sorted(self._entries)

    def description(self, name: str) -> str:
        """What `name` is, in one sentence (`metaxlm list`): the first sentence of its class's own docstring, else of
        its module's (a class inherits no docstring: a subclass without one is described by its module)."""
        import sys

        cls = self.get(name)
        text = cls.__dict__.get("__doc__") or getattr(sys.modules.get(cls.__module__), "__doc__", None) or ""
        paragraph = " ".join(text.strip().split("\n\n")[0].split())
        paragraph = re.sub(r"^`[^`]+`:\s*", "", paragraph)  # "`model.arch: bert`: a BERT encoder ..."
        sentence = re.split(r"(?<=\.)\s+(?=[A-Z`(])", paragraph, maxsplit=1)[0].rstrip(".")
        return sentence if len(sentence) <= DESCRIPTION_WIDTH else \
            sentence[:DESCRIPTION_WIDTH].rsplit(" ", 1)[0].rstrip(",;:") + " ..."

    def __contains__(self, name: str) -> bool:
        self._import_package()
        return name in self._entries


# The registries whose entries a run config names with options of their own (`train.objectives.<name>: {...}`,
# `model.arch` with `model.options`). They are declared here, below every layer, so that loading a config can check
# those options (metaxlm.config.schema.check_component_options) while the entries stay in their own packages,
# imported on first look-up as every registry's are; each package's base class `require`s itself.
OBJECTIVES: Registry = Registry("objective", package="metaxlm.pretrain.objectives")
ARCHS: Registry = Registry("model arch", package="metaxlm.models.archs")


def load_plugins(plugins: list[str]) -> None:
    """Import the config's plugin modules (dotted names or .py files), which register their own components (every
    command that reads a run config: metaxlm.config.load_config). A module is imported once per process."""
    import importlib.util
    import sys
    from pathlib import Path

    for i, ref in enumerate(plugins):
        try:
            if ref.endswith(".py"):
                name = f"metaxlm_plugin_{Path(ref).stem}"
                if name in sys.modules:
                    continue
                spec = importlib.util.spec_from_file_location(name, ref)
                if spec is None or not Path(ref).is_file():
                    raise FileNotFoundError(f"no such file: {ref}")
                module = importlib.util.module_from_spec(spec)
                sys.modules[name] = module
                spec.loader.exec_module(module)
            else:
                importlib.import_module(ref)
        except (ImportError, OSError, SyntaxError) as err:
            raise ConfigError(f"plugins[{i}]: cannot import {ref}: {err}") from None
