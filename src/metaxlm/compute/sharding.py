"""Sharded training (`train.sharding: fsdp`): torch's own FSDP, its `fully_shard` API (FSDP2), on CPU (gloo) as on
GPUs (nccl) — the same code, only the device mesh's device type differs.

What is sharded: every transformer layer of the model's architecture (the type of `ModelArch.layers`), wherever it
sits — the model's stack and copies of it such as MoCo's momentum encoder — is a group of its own; the rest
(embeddings, the tied MLM head, the objectives' heads and buffers' owners) is the root group, the objectives' module.
Each process holds 1/N of every parameter, of its gradient and of AdamW's two moments; a layer's parameters are
gathered for its forward and backward only, the root's for the module's forward. That is what lets a model whose
replicated optimizer state would not fit one GPU train (DDP keeps all of it on every GPU).

Three rules the engine follows, and why:
* `shard` initializes the root at once (FSDP2 otherwise does it at the first forward of the root, and a layer called
  before that — self-labelling runs before the step's forward — would make itself a root).
* Calls of the model outside the module's forward (self-labelling, MoCo's keys, the held-out loss, objectives'
  evaluations) run inside `gathered(module)`: it gathers the root group; layers gather through their own hooks.
* Updates outside the forward (MoCo's EMA of the encoder) work on the shards as they are: the copies are sharded
  alike, so a shard of the copy meets the same shard of the original.

Checkpoints stay full (weights, objectives' states and the optimizer's state gathered, written by rank 0), so a
sharded run's `final/` and checkpoints load like any other's and a run can resume on another process count.
Buffers (MoCo's queue, statistics) are not sharded by FSDP: each process keeps its own, as under DDP.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

import torch
from torch import nn


def is_sharded(module: nn.Module) -> bool:
    from torch.distributed.fsdp import FSDPModule

    return isinstance(module, FSDPModule)


def shard(module: nn.Module, layer_types: tuple[type, ...], device: torch.device) -> nn.Module:
    """Shard `module` in place over every process of the default process group: each module of `layer_types` a
    group, then the root. Returns the module (now also an `FSDPModule`)."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    module.to(device)
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    for sub in module.modules():
        if isinstance(sub, layer_types):
            fully_shard(sub, mesh=mesh)
    fully_shard(module, mesh=mesh)
    module._get_fsdp_state()._lazy_init()  # the root is this module, whatever is called first (see the docstring)
    return module


def gathered(module: nn.Module):
    """A context in which the root group's parameters are whole (nothing to do for an unsharded module)."""
    return _gathered(module) if is_sharded(module) else nullcontext()


@contextmanager
def _gathered(module) -> Iterator[None]:
    module.unshard()
    try:
        yield
    finally:
        module.reshard()


def full_tensors(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Each sharded tensor whole (collective: every process calls it, in the same order); others as they are."""
    from torch.distributed.tensor import DTensor

    return {k: v.full_tensor() if isinstance(v, DTensor) else v for k, v in tensors.items()}


def full_model_state(module: nn.Module) -> dict[str, torch.Tensor]:
    """The whole state dict of a sharded module, on the CPU of rank 0 ({} elsewhere). Collective.

    Tied parameters (the MLM decoder and the embeddings) are one tensor under each of their names, as in an
    unsharded model's `state_dict()`: gathered, each name would get a copy of its own, and `save_pretrained` would
    write the tied weight twice."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    full = get_model_state_dict(module, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    first: dict[int, str] = {}
    for name, param in module.named_parameters(remove_duplicate=False):
        first.setdefault(id(param), name)
        if name in full and first[id(param)] in full:
            full[name] = full[first[id(param)]]
    return full


def optimizer_state(module: nn.Module, optimizer: torch.optim.Optimizer) -> dict:
    """The optimizer's whole state keyed by parameter name (as in `module.named_parameters()`; `module` unwrapped),
    param groups with their own settings: one checkpoint format whatever trained it (one process, DDP, FSDP), so a
    run can resume under another. Sharded: collective, whole on the CPU of rank 0 only ({} elsewhere)."""
    if is_sharded(module):
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

        return get_optimizer_state_dict(module, optimizer,
                                        options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    names = _names_by_position(module, optimizer)
    return _rekeyed(optimizer.state_dict(), dict(enumerate(names)))


def load_optimizer_state(module: nn.Module, optimizer: torch.optim.Optimizer, state: dict) -> None:
    """Load a state from `optimizer_state` (every process passes the whole state; a sharded one keeps its shard).
    A state keyed by position (checkpoints written before the by-name format) loads too."""
    names = _names_by_position(module, optimizer)
    if any(isinstance(i, int) for g in state["param_groups"] for i in g["params"]):  # keyed by position
        state = _rekeyed(state, dict(enumerate(names)))
    if is_sharded(module):
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

        set_optimizer_state_dict(module, optimizer, state, options=StateDictOptions(full_state_dict=True))
        return
    optimizer.load_state_dict(_rekeyed(state, {name: i for i, name in enumerate(names)}))


def _rekeyed(state: dict, key: dict) -> dict:
    """An optimizer state with each parameter's key (position or name) replaced by `key[...]`."""
    return {"state": {key[k]: v for k, v in state["state"].items()},
            "param_groups": [{**g, "params": [key[k] for k in g["params"]]} for g in state["param_groups"]]}


def _names_by_position(module: nn.Module, optimizer: torch.optim.Optimizer) -> list[str]:
    """The name of each parameter of `optimizer`, in the order of its param groups (the positions of its
    `state_dict()`). A tied parameter has the name `named_parameters` gives it first."""
    name_of = {id(p): n for n, p in module.named_parameters()}
    return [name_of[id(p)] for group in optimizer.param_groups for p in group["params"]]
