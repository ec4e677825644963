"""The CPU fast path for training forwards, in fp32 and bf16 alike: dropout masks from parallel numpy streams
(torch's bernoulli_ is slow, serial work on CPU), plain attention with an fp32 softmax instead of SDPA with dropout
(which on CPU falls back to the fp32 "math" kernel), and freed memory kept for reuse by glibc.

Used by every training loop (pretraining, fine-tuning) through `training_fast_path(device)`.
"""

from __future__ import annotations

import ctypes
import math
import platform
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext

import numpy as np
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

_RNG_CHUNK = 1 << 20  # elements per numpy random stream: fixed, so masks do not depend on the thread count
_rng_pools: dict[int, ThreadPoolExecutor] = {}  # by worker count
_rng_pools_lock = threading.Lock()


def _keep_mask(shape: torch.Size, p: float) -> torch.Tensor:
    """Bool mask of `shape`, True with probability 1-p (u >= p for u ~ U[0, 1) in float32). The seed is one draw
    from torch's default generator, so masks are a function of torch.manual_seed as torch's own dropout masks
    are; numpy's PCG64 fills fixed chunks (one stream per chunk, so the result does not depend on the thread
    count) in parallel threads (numpy releases the GIL): several times faster than torch's bernoulli_."""
    n = math.prod(shape)
    seed = int(torch.randint(0, 2**62, ()))
    out = np.empty(n, dtype=np.bool_)

    def fill(start: int) -> None:
        gen = np.random.Generator(np.random.PCG64([seed, start // _RNG_CHUNK]))
        u = gen.random(min(_RNG_CHUNK, n - start), dtype=np.float32)
        np.greater_equal(u, np.float32(p), out=out[start:start + _RNG_CHUNK])

    starts = range(0, n, _RNG_CHUNK)
    workers = torch.get_num_threads()
    if len(starts) > 1 and workers > 1:
        with _rng_pools_lock:
            pool = _rng_pools.get(workers) or _rng_pools.setdefault(
                workers, ThreadPoolExecutor(max_workers=workers, thread_name_prefix="metaxlm-rng"))
        list(pool.map(fill, starts))
    else:
        for start in starts:
            fill(start)
    return torch.from_numpy(out).view(shape)


def fast_dropout(x: torch.Tensor, p: float) -> torch.Tensor:
    """Dropout (zero with probability p, scale the rest by 1/(1-p)): the semantics of F.dropout."""
    return x * _keep_mask(x.shape, p).to(x.dtype).mul_(1.0 / (1.0 - p))


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dropout_p: float, scale: float | None) -> torch.Tensor:
    """softmax(q k^T * scale) v with dropout on the probabilities: matmuls in the autocast dtype, softmax in fp32."""
    scores = torch.matmul(q, k.transpose(-2, -1)) * (q.shape[-1] ** -0.5 if scale is None else scale)
    probs = torch.softmax(scores, dim=-1, dtype=torch.float32)
    if dropout_p > 0:
        probs = fast_dropout(probs, dropout_p)
    return torch.matmul(probs.to(v.dtype), v)


_SDPA_ARGS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
_DROPOUT_ARGS = ("input", "p", "training", "inplace")


class CPUTrainingFastPath(TorchFunctionMode):
    """While active, CPU tensors with autograd on take `fast_dropout` for F.dropout and `attention` for
    F.scaled_dot_product_attention without mask (packed sequences have none); anything else is untouched."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.dropout:
            a = {**dict(zip(_DROPOUT_ARGS, args, strict=False)), **kwargs}
            x, p = a["input"], a.get("p", 0.5)
            if a.get("training", True) and not a.get("inplace", False) and 0.0 < p < 1.0 and x.device.type == "cpu" \
                    and x.is_floating_point() and torch.is_grad_enabled():
                return fast_dropout(x, p)
        elif func is F.scaled_dot_product_attention:
            a = {**dict(zip(_SDPA_ARGS, args, strict=False)), **kwargs}
            q, k, v = a["query"], a["key"], a["value"]
            if a.get("attn_mask") is None and not a.get("is_causal", False) and not a.get("enable_gqa", False) \
                    and torch.is_grad_enabled() and q.device.type == "cpu" and q.dim() == 4 and not q.is_nested \
                    and q.shape[1] == k.shape[1] == v.shape[1]:
                return attention(q, k, v, a.get("dropout_p", 0.0), a.get("scale"))
        return func(*args, **kwargs)


def reuse_freed_memory() -> bool:
    """glibc serves blocks over 32 MB (the vocabulary logits, the embedding matrix's gradients) with fresh mmaps
    and unmaps them when freed, and trims the heap, so every step page-faults that memory in again (~20 ms per
    73 MB tensor on the benchmark machine, ~20% of a step). Keep freed memory in the process's heap instead:
    a training process reaches the same peak every step anyway. Linux/glibc only; process-wide."""
    if sys.platform != "linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    m_trim_threshold, m_mmap_max = -1, -4  # from <malloc.h>
    return bool(libc.mallopt(m_mmap_max, 0)) and bool(libc.mallopt(m_trim_threshold, 2**31 - 1))


def training_fast_path(device: torch.device):
    return CPUTrainingFastPath() if device.type == "cpu" else nullcontext()
