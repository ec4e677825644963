"""Task types by name. A new task type is one new file in this folder defining a `Task` subclass
decorated with `@TASKS.register("name")`: every module here is imported on first look-up (as in fairseq),
with the registry convention of objectives, batch kinds and model architectures (metaxlm.registry)."""

from __future__ import annotations

from metaxlm.finetune.tasks.base import Task
from metaxlm.registry import Registry

TASKS: Registry[type[Task]] = Registry("task type", package="metaxlm.finetune.tasks")
register_task = TASKS.register


def get_task(name: str) -> type[Task]:
    return TASKS.get(name)


__all__ = ["TASKS", "Task", "get_task", "register_task"]
