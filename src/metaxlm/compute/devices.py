"""Where tensors live: the one device decision, the one move to it, and a simulated accelerator for CPU-only checks.

* `compute_device()` — the device every loop runs on (fine-tuning, inference, retrieval, alignment, translation): the
  GPU when there is one, else the CPU. The pretraining engine takes accelerate's (`acc.device`: `cuda:<local rank>`
  under DDP). Both are the simulated device while `simulated_device()` is active.
* `to_device(obj, device)` — tensors inside dicts, lists, tuples and dataclasses (an objective's `Prepared`) moved
  there, everything else as it is. Loops call it once per batch at their boundary; objectives create their own
  tensors on the device of the tensors they are given (`torch.zeros(..., device=ids.device)`), never on the default.
* `simulated_device()` — a context in which the device is `meta` while the data stay on the CPU: every tensor moved
  "there" is a `SimulatedTensor` (reports device meta, computes on its CPU data) and any operation that mixes one with
  a CPU tensor of more than zero dimensions raises `DeviceMismatch`, as CUDA raises "Expected all tensors to be on the
  same device". A tensor a loop forgot to move, or an objective made on the default device, is therefore an error on
  a machine without a GPU. It is stricter than CUDA in one way: CUDA lets CPU index tensors index a CUDA tensor (with
  a hidden copy and sync per call); here that is a mismatch too. More lenient in another: every 0-dim CPU tensor is
  taken as a scalar, where CUDA takes them in elementwise ops only (a 0-dim CPU index to `gather` would pass here).
  Host reads (`.item()`, `.tolist()`, `int(t)`, `.cpu()`) work, as on a GPU. Autocast has no meta device, so a simulated
  run trains in fp32 (`precision` refuses bf16 / fp16 there); one process only (DDP's reducer does not take tensor
  subclasses).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode, return_and_correct_aliasing
from torch.utils._pytree import tree_leaves, tree_map

SIMULATED = torch.device("meta")
_simulating: list[bool] = []


def simulating() -> bool:
    """Whether `simulated_device()` is active (in this thread)."""
    return bool(_simulating)


def compute_device() -> torch.device:
    """The device every loop runs on: the simulated one inside `simulated_device()`, else the GPU when there is one,
    else the CPU."""
    if simulating():
        return SIMULATED
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def to_device(obj: Any, device: torch.device | str) -> Any:
    """`obj` with every tensor in it (through dicts, lists, tuples and dataclass fields) on `device`; other values as
    they are. A tensor already there is returned as it is (no copy)."""
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return {k: to_device(v, device) for k, v in obj.items()}
    if isinstance(obj, list | tuple) and not hasattr(obj, "_fields"):
        return type(obj)(to_device(v, device) for v in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.replace(obj, **{f.name: to_device(getattr(obj, f.name), device)
                                           for f in dataclasses.fields(obj) if f.init})
    return obj


# -- the simulated accelerator ---------------------------------------------------------------------------------------
class DeviceMismatch(RuntimeError):
    """A tensor on the simulated device met a CPU tensor: on a GPU this operation would fail."""


def _is_simulated_device(device) -> bool:
    return device is not None and torch.device(device).type == SIMULATED.type


_HOST_READS = {torch.Tensor.tolist, torch.Tensor.item, torch.Tensor.__bool__, torch.Tensor.__int__,
               torch.Tensor.__float__, torch.Tensor.__index__}


class SimulatedTensor(torch.Tensor):
    """A tensor on the simulated device: reports `SIMULATED`, holds its data in `elem` (a CPU tensor)."""

    elem: torch.Tensor

    @staticmethod
    def __new__(cls, elem: torch.Tensor):
        return torch.Tensor._make_wrapper_subclass(
            cls, elem.shape, strides=elem.stride(), storage_offset=elem.storage_offset(), dtype=elem.dtype,
            layout=elem.layout, device=SIMULATED, requires_grad=elem.requires_grad)

    def __init__(self, elem: torch.Tensor):
        self.elem = elem

    def __repr__(self, *, tensor_contents=None) -> str:
        return f"SimulatedTensor({self.elem!r})"

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in _HOST_READS:  # as on a GPU (torch refuses them for subclasses and meta tensors)
            return func(args[0].elem, *args[1:], **(kwargs or {}))
        if func is torch.Tensor.is_meta.__get__:  # a device with data (load_state_dict would warn it copies nothing)
            return False
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise DeviceMismatch(f"{func}: a tensor on the simulated device was used outside simulated_device()")


def _describe(t: torch.Tensor) -> str:
    return f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)}"


# operations that copy between devices, as on a GPU (`param.copy_(cpu_tensor)` when a checkpoint loads)
_CROSSING = {torch.ops.aten.copy_.default, torch.ops.aten._to_copy.default}


class _SimulatedDeviceMode(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors = [x for x in tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
        here = [t for t in tensors if isinstance(t, SimulatedTensor)]
        host = [t for t in tensors if not isinstance(t, SimulatedTensor) and t.dim() > 0]  # 0-dim: a scalar, as CUDA
        if any(t.device.type == SIMULATED.type for t in tensors if not isinstance(t, SimulatedTensor)):
            raise RuntimeError(f"{func}: a real meta tensor (no data) reached the simulated device: it was made there "
                               f"by a constructor the simulation does not see (add it to _FROM_DATA)")
        if here and host and func not in _CROSSING:
            raise DeviceMismatch(
                f"{func}: tensors on the device ({', '.join(map(_describe, here[:3]))}) and on the CPU "
                f"({', '.join(map(_describe, host[:3]))}): on a GPU this fails with 'Expected all tensors to be on "
                f"the same device'")
        # the device an op is told to put its output on (a keyword, or positional as in aten.to.device)
        targets = [x.type for x in tree_leaves((args, kwargs)) if isinstance(x, torch.device)]
        arrives = SIMULATED.type in targets
        generator = kwargs.get("generator")
        if (arrives or here) and generator is not None and generator.device.type == "cpu":
            raise DeviceMismatch(f"{func}: a CPU generator draws on the device: on a GPU this fails with 'Expected a "
                                 f"'cuda' device type for generator'")
        leaves = "cpu" in targets

        def unwrap(x):
            if isinstance(x, torch.device) and x.type == SIMULATED.type:
                return torch.device("cpu")
            return x.elem if isinstance(x, SimulatedTensor) else x

        out = func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs))
        if leaves or not (here or arrives):
            return out
        # a view of a tensor made outside inference mode must not be an inference tensor (torch sets its version
        # counter from its base's): such wrappers are made with inference mode off
        with torch.inference_mode(False) if func.is_view else nullcontext():
            out = tree_map(lambda x: SimulatedTensor(x) if isinstance(x, torch.Tensor) and
                       not isinstance(x, SimulatedTensor) else x, out)
        if arrives or torch.is_inference_mode_enabled() or any(not isinstance(t, SimulatedTensor) for t in tensors):
            return out  # a copy between devices (no alias), or no autograd to keep the aliases for (their data alias)
        # an in-place op returns its argument itself, a view shares its base's data: as torch's own subclasses do
        return return_and_correct_aliasing(func, args, kwargs, out)


# constructors from Python data, which build the tensor below the dispatcher (torch.tensor(x, device=...) would give a
# real meta tensor, without its data): built on the CPU, then moved, as a copy the dispatch mode sees
_FROM_DATA = {torch.tensor, torch.as_tensor, torch.asarray}


class _ConstructOnHost(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _FROM_DATA and _is_simulated_device(kwargs.get("device")):
            return func(*args, **{**kwargs, "device": "cpu"}).to(SIMULATED)
        return func(*args, **kwargs)


@contextmanager
def simulated_device() -> Iterator[torch.device]:
    """Run the block with `compute_device()` and accelerate's `Accelerator.device` giving the simulated device (see
    the module docstring); yields it. Tensors moved there stay usable only inside the block."""
    from accelerate import Accelerator

    real = Accelerator.__dict__["device"]
    swapping = torch.__future__.get_swap_module_params_on_conversion()
    _simulating.append(True)
    Accelerator.device = property(lambda self: SIMULATED)  # what the engine (and accelerate's prepare) place on
    # module.to(device) converts each parameter in place, as for CUDA (else tied weights would come untied)
    torch.__future__.set_swap_module_params_on_conversion(True)
    try:
        with _ConstructOnHost(), _SimulatedDeviceMode():
            yield SIMULATED
    finally:
        torch.__future__.set_swap_module_params_on_conversion(swapping)
        Accelerator.device = real
        _simulating.pop()
