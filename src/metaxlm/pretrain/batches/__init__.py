"""Training batches from prepared Arrow data: one source per batch kind, each α-sampled, seeded and resumable.

An objective names the kind of batch it needs; the engine builds one source per kind with
`BATCH_SOURCES.get(kind)(datasets[source.data], seq_len=, alpha=, seed=, tokenizer=)`. Kinds (one file each):

  mono        packed monolingual text, rows of exactly seq_len tokens (MLM)            input_ids
  pair        one translation pair per row, <s> src </s> tgt </s> (TLM)               input_ids, attention_mask, side, swap
  pair_sides  one translation pair per row, the sides as separate tensors             src_ids, src_mask, tgt_ids, tgt_mask, swap
  segments    two adjacent segments of one monolingual text per row (VECO's x, y)     src_ids, src_mask, tgt_ids, tgt_mask, swap

A new kind is one new file here: subclass `BatchSource`, decorate it with `@BATCH_SOURCES.register("name")`.
"""  # noqa: E501 (the table of batch kinds)

from metaxlm.pretrain.batches.base import BATCH_SOURCES, Batch, BatchSource
from metaxlm.pretrain.batches.mono import MonoSource
from metaxlm.pretrain.batches.pair import PairSource, swap_pair_order
from metaxlm.pretrain.batches.pair_sides import PairSidesSource
from metaxlm.pretrain.batches.prepared import fixed_eval_batches, load_prepared
from metaxlm.pretrain.batches.segments import SegmentsSource
from metaxlm.pretrain.batches.streams import TextStream, _ListColumn

__all__ = ["BATCH_SOURCES", "Batch", "BatchSource", "MonoSource", "PairSidesSource", "PairSource",
           "SegmentsSource", "TextStream", "_ListColumn", "fixed_eval_batches", "load_prepared",
           "swap_pair_order"]
