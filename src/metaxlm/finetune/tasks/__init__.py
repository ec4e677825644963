"""Task types by name. A new task type is one new file in this folder defining a `Task` subclass
decorated with `@register_task("name")`: every module here is imported on first use (as in fairseq)."""

from __future__ import annotations

import importlib
import pkgutil

from metaxlm.errors import ConfigError
from metaxlm.finetune.tasks.base import Task

TASKS: dict[str, type[Task]] = {}


def register_task(name: str):
    def register(cls: type[Task]) -> type[Task]:
        if name in TASKS and TASKS[name] is not cls:
            raise ValueError(f"task type {name!r} is registered twice ({TASKS[name].__name__}, {cls.__name__})")
        cls.name = name
        TASKS[name] = cls
        return cls

    return register


def _import_all() -> None:
    for module in pkgutil.iter_modules(__path__):
        if module.name != "base":
            importlib.import_module(f"{__name__}.{module.name}")


def get_task(name: str) -> type[Task]:
    _import_all()
    if name not in TASKS:
        raise ConfigError(f"unknown task type {name!r} (known: {', '.join(sorted(TASKS))})")
    return TASKS[name]


__all__ = ["TASKS", "Task", "get_task", "register_task"]
