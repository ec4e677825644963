"""The CPU fast path for training forwards, in fp32 and bf16 alike: dropout masks from parallel numpy streams
(torch's bernoulli_ is slow, serial work on CPU), plain attention with an fp32 softmax instead of SDPA with dropout
(which on CPU falls back to the slow "math" kernel), and freed memory kept for reuse by glibc.

fp32 (no autocast) has paths of its own, which touch memory fewer times: dropout multiplies by a scaled float
mask made in the numpy threads (instead of bool mask → float → scaled → product), and attention is one autograd
function (the softmax scale folded into the batched matmul, the scaled dropout mask from the numpy threads,
softmax backward in one kernel: 4 passes over the (heads × T × T) probabilities per layer instead of 8). bf16 autocast
keeps the original code, so its results do not change. Both take an attention mask (padded rows of pair batches): True /
0 = attend, like SDPA (a float mask is added to the scores), and with a bool mask a row that may attend nowhere gives
zeros, as SDPA does.

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
from torch.overrides import TorchFunctionMode, _get_current_function_mode

_RNG_CHUNK = 1 << 20  # elements per numpy random stream: fixed, so masks do not depend on the thread count
_rng_pools: dict[int, ThreadPoolExecutor] = {}  # by worker count
_rng_pools_lock = threading.Lock()


def _keep_mask(shape: torch.Size, p: float, scale: float | None = None) -> torch.Tensor:
    """Bool mask of `shape`, True with probability 1-p (u >= p for u ~ U[0, 1) in float32). The seed is one draw
    from torch's default generator, so masks are a function of torch.manual_seed as torch's own dropout masks
    are; numpy's PCG64 fills fixed chunks (one stream per chunk, so the result does not depend on the thread
    count) in parallel threads (numpy releases the GIL): several times faster than torch's bernoulli_.
    With `scale`: the same mask as float32, `scale` where True and 0 elsewhere."""
    n = math.prod(shape)
    seed = int(torch.randint(0, 2**62, ()))
    out = np.empty(n, dtype=np.bool_ if scale is None else np.float32)

    def fill(start: int) -> None:
        gen = np.random.Generator(np.random.PCG64([seed, start // _RNG_CHUNK]))
        u = gen.random(min(_RNG_CHUNK, n - start), dtype=np.float32)
        if scale is None:
            np.greater_equal(u, np.float32(p), out=out[start:start + _RNG_CHUNK])
        else:
            np.multiply(u >= np.float32(p), np.float32(scale), out=out[start:start + _RNG_CHUNK])

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
    """Dropout (zero with probability p, scale the rest by 1/(1-p)): the semantics of F.dropout. For fp32 the
    scaled float mask comes straight from the numpy threads (the same values as the bool mask turned float and
    scaled in torch, so the result is bit-identical)."""
    if x.dtype == torch.float32:
        return x * _keep_mask(x.shape, p, scale=1.0 / (1.0 - p))
    return x * _keep_mask(x.shape, p).to(x.dtype).mul_(1.0 / (1.0 - p))


def _additive_mask(attn_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """SDPA's attn_mask as an additive float mask: bool True = attend (0), False = the dtype's most negative
    finite value (finite, so a row that may attend nowhere stays NaN-free until `_dead_rows` zeroes it)."""
    if attn_mask.dtype == torch.bool:
        return torch.zeros(attn_mask.shape, dtype=dtype).masked_fill_(~attn_mask, torch.finfo(dtype).min)
    return attn_mask.to(dtype)


def _dead_rows(attn_mask: torch.Tensor | None) -> torch.Tensor | None:
    """Query rows (…, T, 1) of a bool mask that may attend to no key, or None when there are none: SDPA gives
    them zeros (a float mask is only added to the scores, by SDPA as here)."""
    if attn_mask is None or attn_mask.dtype != torch.bool:
        return None
    dead = ~attn_mask.any(dim=-1, keepdim=True)
    return dead if bool(dead.any()) else None


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dropout_p: float, scale: float | None,
              attn_mask: torch.Tensor | None = None) -> torch.Tensor:
    """softmax(q k^T * scale [+ mask]) v with dropout on the probabilities: matmuls in the autocast dtype,
    softmax in fp32 (the bf16 path; fp32 without autocast takes `float32_attention`)."""
    scores = torch.matmul(q, k.transpose(-2, -1)) * (q.shape[-1] ** -0.5 if scale is None else scale)
    if attn_mask is not None:
        scores = scores + _additive_mask(attn_mask, scores.dtype)
    probs = torch.softmax(scores, dim=-1, dtype=torch.float32)
    if (dead := _dead_rows(attn_mask)) is not None:
        probs = probs.masked_fill(dead, 0.0)
    if dropout_p > 0:
        probs = fast_dropout(probs, dropout_p)
    return torch.matmul(probs.to(v.dtype), v)


def _bmm(a: torch.Tensor, b: torch.Tensor, alpha: float) -> torch.Tensor:
    """alpha * (a @ b) in one kernel (the scale applied inside the GEMM, not as another pass)."""
    return torch.baddbmm(a.new_empty(()), a, b, beta=0.0, alpha=alpha)


class _Float32Attention(torch.autograd.Function):
    """fp32 attention on (B, H, T, D) inputs with dropout on the probabilities, forward and backward by hand:
    what autograd would do, with the softmax scale folded into the first batched matmul, the dropout mask
    made scaled (0 or 1/(1-p)) by the numpy threads, and the softmax backward in one kernel."""

    @staticmethod
    def forward(ctx, q, k, v, bias, dead, dropout_p: float, scale: float):
        b, h, t, d = q.shape
        s = k.shape[2]
        q3, k3, v3 = q.reshape(b * h, t, d), k.reshape(b * h, s, d), v.reshape(b * h, s, d)
        scores = _bmm(q3, k3.transpose(1, 2), scale)
        if bias is not None:
            scores = scores.view(b, h, t, s).add_(bias).view(b * h, t, s)
        probs = torch.softmax(scores, dim=-1)
        del scores
        if dead is not None:
            probs = probs.view(b, h, t, s).masked_fill_(dead, 0.0).view(b * h, t, s)
        keep = _keep_mask(probs.shape, dropout_p, scale=1.0 / (1.0 - dropout_p)) if dropout_p > 0 else None
        dropped = probs if keep is None else probs * keep
        out = torch.bmm(dropped, v3)
        ctx.save_for_backward(q3, k3, v3, probs, dropped, keep)
        ctx.dropout_p, ctx.scale, ctx.shapes = dropout_p, scale, (q.shape, k.shape, v.shape)
        return out.view(b, h, t, v.shape[-1])

    @staticmethod
    def backward(ctx, grad):
        q3, k3, v3, probs, dropped, keep = ctx.saved_tensors
        g3 = grad.reshape(probs.shape[0], probs.shape[1], -1)
        dv = torch.bmm(dropped.transpose(1, 2), g3)
        dprobs = torch.bmm(g3, v3.transpose(1, 2))
        if keep is not None:
            dprobs.mul_(keep)
        dscores = torch._softmax_backward_data(dprobs, probs, -1, probs.dtype)
        del dprobs
        dq = _bmm(dscores, k3, ctx.scale)
        dk = _bmm(dscores.transpose(1, 2), q3, ctx.scale)
        q_shape, k_shape, v_shape = ctx.shapes
        return dq.view(q_shape), dk.view(k_shape), dv.view(v_shape), None, None, None, None


def float32_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dropout_p: float, scale: float | None,
                      attn_mask: torch.Tensor | None = None) -> torch.Tensor:
    """`attention` for fp32 tensors without autocast, as one autograd function (see _Float32Attention)."""
    bias = None if attn_mask is None else _additive_mask(attn_mask, torch.float32)
    return _Float32Attention.apply(q, k, v, bias, _dead_rows(attn_mask), float(dropout_p),
                                   q.shape[-1] ** -0.5 if scale is None else float(scale))


_SDPA_ARGS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
_DROPOUT_ARGS = ("input", "p", "training", "inplace")


class CPUTrainingFastPath(TorchFunctionMode):
    """While active, CPU tensors with autograd on take `fast_dropout` for F.dropout, and for
    F.scaled_dot_product_attention `attention` under bf16 autocast (mask or not, dropout or not), and
    `float32_attention` in fp32 with dropout (SDPA's fused CPU kernel takes none; without dropout it is the
    fastest, and SDPA stays); anything else is untouched."""

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
            mask, dropout_p = a.get("attn_mask"), a.get("dropout_p", 0.0)
            if not a.get("is_causal", False) and not a.get("enable_gqa", False) \
                    and torch.is_grad_enabled() and q.device.type == "cpu" and q.dim() == 4 and not q.is_nested \
                    and q.shape[1] == k.shape[1] == v.shape[1] and _mask_fits(mask, q, k):
                if q.dtype == k.dtype == v.dtype == torch.float32 and not torch.is_autocast_enabled("cpu"):
                    if dropout_p > 0:  # without dropout SDPA's fused kernel is as fast or faster, mask or not
                        return float32_attention(q, k, v, dropout_p, a.get("scale"), mask)
                else:  # bf16 autocast: without a mask, exactly the path as it always was
                    return attention(q, k, v, dropout_p, a.get("scale"), mask)
        return func(*args, **kwargs)

    def __exit__(self, exc_type, exc_val, exc_tb):
        # Ctrl-C or SIGTERM landing inside torch's handle_torch_function, between its taking this mode off the stack
        # and putting it back, leaves it off: popping it again would raise "trying to pop from empty mode stack" (or
        # take another mode) and turn the interrupt into a traceback
        interrupted = exc_type is not None and not issubclass(exc_type, Exception)
        if interrupted and _get_current_function_mode() is not self:
            return None
        return super().__exit__(exc_type, exc_val, exc_tb)


def _mask_fits(mask: torch.Tensor | None, q: torch.Tensor, k: torch.Tensor) -> bool:
    """A mask the fast paths take: None, or bool/float, 4-d, broadcastable to (B, H, T, S)."""
    if mask is None:
        return True
    if mask.dim() != 4 or not (mask.dtype == torch.bool or mask.is_floating_point()):
        return False
    want = (q.shape[0], q.shape[1], q.shape[2], k.shape[2])
    return all(m in (1, w) for m, w in zip(mask.shape, want, strict=True))


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
