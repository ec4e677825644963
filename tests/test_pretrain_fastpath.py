"""The engine's CPU fast path: dropout masks, plain attention, zero-copy Arrow rows, padded masked-only head."""

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


def test_attention_matches_sdpa_and_is_used_only_without_mask():
    q, k, v = torch.randn(3, 2, 4, 16, 8).unbind(0)
    torch.testing.assert_close(fastpath.attention(q, k, v, 0.0, None), F.scaled_dot_product_attention(q, k, v))
    mask = torch.zeros(16, 16, dtype=torch.bool).tril()
    with fastpath.CPUTrainingFastPath():  # a mask (or causal) goes to torch's own kernel
        torch.testing.assert_close(F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
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
