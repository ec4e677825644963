"""The CPU training fast path: dropout masks, attention (fp32 and bf16, with and without padding masks, and which
one is taken when), the bf16 path unchanged; zero-copy Arrow rows."""

import datasets
import pytest
import torch
import torch.nn.functional as F

from metaxlm.compute import fastpath
from metaxlm.pretrain.batches import TextStream, _ListColumn


def test_fast_dropout_rate_scale_and_determinism():
    x = torch.ones(2000, 1500)
    torch.manual_seed(0)
    with fastpath.CPUTrainingFastPath():
        y = F.dropout(x, 0.1, training=True)
        z = F.dropout(x, 0.1, training=False)  # eval: untouched
    assert (y == 0).float().mean().item() == pytest.approx(0.1, abs=0.002)
    assert torch.equal(y[y != 0].unique(), torch.tensor([1 / 0.9]))
    assert torch.equal(z, x)
    threads = torch.get_num_threads()
    masks = []
    try:
        for n in (1, 2):  # the masks are a function of torch's seed only, not of the thread count
            torch.set_num_threads(n)
            torch.manual_seed(7)
            masks.append(fastpath._keep_mask(torch.Size([3, 1 << 20]), 0.3))
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(masks[0], masks[1])
    torch.manual_seed(8)
    assert not torch.equal(masks[0], fastpath._keep_mask(torch.Size([3, 1 << 20]), 0.3))


def heads_last(*shape) -> torch.Tensor:
    """(B, H, T, D) as HF hands it to SDPA: a transposed view of (B, T, H, D) projections."""
    b, h, t, d = shape
    return torch.randn(b, t, h, d).transpose(1, 2).requires_grad_()


def grads(out: torch.Tensor, inputs, seed: int = 0) -> list[torch.Tensor]:
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed))
    return list(torch.autograd.grad(out, inputs, g))


def padding_mask(b: int, t: int) -> torch.Tensor:
    """(B, 1, T, T) bool, True = attend: row 0 has 3 padded keys; in row 1, query 2 may attend nowhere."""
    mask = torch.ones(b, 1, t, t, dtype=torch.bool)
    mask[0, ..., t - 3:] = False
    mask[1, 0, 2, :] = False
    return mask


@pytest.mark.parametrize("mask_kind", [None, "bool", "float"])
def test_float32_attention_equals_sdpa_forward_and_backward(mask_kind):
    torch.manual_seed(0)
    q, k, v = (heads_last(2, 3, 7, 4) for _ in range(3))
    mask = padding_mask(2, 7)
    if mask_kind is None:
        mask = None
    elif mask_kind == "float":  # additive, without rows that may attend nowhere (SDPA's flash kernel differs there)
        mask[1, 0, 2, 0] = True
        mask = torch.zeros(mask.shape).masked_fill(~mask, -1e4)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    out = fastpath.float32_attention(q, k, v, 0.0, None, mask)
    torch.testing.assert_close(out, ref)
    for got, want in zip(grads(out, (q, k, v)), grads(ref, (q, k, v)), strict=True):
        torch.testing.assert_close(got, want)
    if mask_kind == "bool":  # a query row that may attend nowhere gives zeros, as SDPA's
        assert torch.equal(out[1, :, 2], torch.zeros_like(out[1, :, 2]))


def test_float32_attention_gradients_are_exact():
    torch.manual_seed(1)
    q, k, v = (torch.randn(2, 2, 5, 3, dtype=torch.float64, requires_grad=True) for _ in range(3))
    bias = torch.zeros(2, 1, 5, 5, dtype=torch.float64)
    bias[0, ..., 3:] = -30.0  # padded keys (a finite bias: finite differences need it)
    assert torch.autograd.gradcheck(lambda a, b, c: fastpath._Float32Attention.apply(a, b, c, bias, None, 0.0, 0.5),
                                    (q, k, v))


@pytest.mark.parametrize("masked", [False, True])
def test_float32_attention_dropout_is_dropout_on_the_probabilities(masked):
    """The same as softmax → dropout (the mask _keep_mask draws after the same seed) → @ v, gradients too."""
    torch.manual_seed(2)
    q, k, v = (heads_last(2, 3, 6, 4) for _ in range(3))
    mask, p = (padding_mask(2, 6) if masked else None), 0.3
    torch.manual_seed(5)
    out = fastpath.float32_attention(q, k, v, p, None, mask)
    torch.manual_seed(5)
    keep = fastpath._keep_mask(torch.Size([2 * 3, 6, 6]), p).view(2, 3, 6, 6)
    scores = q @ k.transpose(-1, -2) * 4**-0.5
    if masked:
        scores = scores.masked_fill(~mask, float("-inf"))
    probs = torch.nan_to_num(torch.softmax(scores, -1))  # a row that attends nowhere: zeros, as in SDPA
    ref = probs * keep / (1 - p) @ v
    torch.testing.assert_close(out, ref)
    for got, want in zip(grads(out, (q, k, v)), grads(ref, (q, k, v)), strict=True):
        torch.testing.assert_close(got, want)
    assert 0 < int((~keep).sum()) < keep.numel()


def test_bf16_path_is_unchanged():
    """Under bf16 autocast the unmasked attention and every dropout compute exactly what they always did
    (the demo's numbers are the regression check), including fp32 dropout inputs (after LayerNorm)."""
    torch.manual_seed(3)
    q, k, v = (torch.randn(2, 3, 8, 4, dtype=torch.bfloat16) for _ in range(3))
    torch.manual_seed(7)
    got = fastpath.attention(q, k, v, 0.1, None)
    torch.manual_seed(7)
    scores = torch.matmul(q, k.transpose(-2, -1)) * 4**-0.5
    probs = torch.softmax(scores, dim=-1, dtype=torch.float32)
    probs = probs * fastpath._keep_mask(probs.shape, 0.1).to(probs.dtype).mul_(1.0 / (1.0 - 0.1))
    assert torch.equal(got, torch.matmul(probs.to(v.dtype), v))
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(300, 1100).to(dtype)
        torch.manual_seed(9)
        new = fastpath.fast_dropout(x, 0.1)
        torch.manual_seed(9)
        assert torch.equal(new, x * fastpath._keep_mask(x.shape, 0.1).to(x.dtype).mul_(1.0 / (1.0 - 0.1)))


def test_which_attention_the_fast_path_takes(monkeypatch):
    taken = []
    for name in ("attention", "float32_attention"):
        real = getattr(fastpath, name)
        monkeypatch.setattr(fastpath, name, lambda *a, _n=name, _f=real: taken.append(_n) or _f(*a))
    q, k, v = (heads_last(2, 2, 5, 4) for _ in range(3))
    mask = padding_mask(2, 5)
    cases = [  # (autocast bf16, dropout, mask) -> the function taken (None: torch's SDPA)
        (False, 0.1, None, "float32_attention"), (False, 0.1, mask, "float32_attention"),
        (False, 0.0, None, None), (False, 0.0, mask, None),  # no dropout: SDPA's fused kernel is the fastest
        (True, 0.1, None, "attention"), (True, 0.0, None, "attention"), (True, 0.1, mask, "attention")]
    for bf16, p, m, want in cases:
        taken.clear()
        with fastpath.CPUTrainingFastPath(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            F.scaled_dot_product_attention(q, k, v, attn_mask=m, dropout_p=p)
        assert taken == ([want] if want else []), (bf16, p, m is not None)
    taken.clear()
    with fastpath.CPUTrainingFastPath():  # causal, or a mask that does not broadcast: torch's own kernel
        F.scaled_dot_product_attention(q, k, v, dropout_p=0.1, is_causal=True)
        F.scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(5, 5, dtype=torch.bool), dropout_p=0.1)
        with torch.no_grad():  # inference: untouched
            F.scaled_dot_product_attention(q, k, v, dropout_p=0.1)
    assert taken == []


def test_bf16_attention_with_a_padding_mask_matches_sdpa():
    torch.manual_seed(4)
    q, k, v = (torch.randn(2, 3, 7, 4) for _ in range(3))
    mask = padding_mask(2, 7)
    torch.testing.assert_close(fastpath.attention(q, k, v, 0.0, None, mask),
                               F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


def test_zero_copy_rows_equal_dataset_rows():
    ds = datasets.concatenate_datasets([datasets.Dataset.from_dict({"input_ids": [[i, i + 1][: i % 3] for i in r]})
                                        for r in (range(0, 7), range(7, 20))])  # two Arrow chunks, empty rows
    col = _ListColumn.of(ds, "input_ids")
    assert col is not None and [col.row(i) for i in range(len(ds))] == ds["input_ids"]
    view = ds.select([5, 1, 3])  # an indices mapping: falls back to the dataset's own row access
    assert _ListColumn.of(view, "input_ids") is None
    stream = TextStream(view, "x", seed=0)
    assert sorted(map(tuple, (stream.next_text() for _ in range(3)))) == sorted(map(tuple, view["input_ids"]))
