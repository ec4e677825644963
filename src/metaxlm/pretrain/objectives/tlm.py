"""Translation language modelling (XLM; Conneau & Lample 2019): MLM over a translation pair.

Each row holds ONE translation pair, `<s> src </s> tgt </s>` (the `pair` batch source; a pair is never split across
rows, padding is masked out by the attention mask), so a masked word can be predicted from its context in the same
language or from its translation, which encourages aligned representations. This is the setting of XLM's TLM and of
PPA (Pan et al. 2021: `S_a [SEP] S_b`). As in PPA and unlike XLM, positions are not reset at the target sentence and
there are no language embeddings (the encoders metaxlm trains have none). Masking and the masked-only output layer
are MLM's; only the data differs.

`order`: `fixed` (default: English first, as XLM) or `shuffled` (PPA): each pair's sides in the order of its seeded
coin (`swap` of the pair batch), the same coin MoCo's random input shuffling uses for that pair in the same step.
"""

from __future__ import annotations

from typing import Literal

import torch

from metaxlm.pretrain.batches.pair import swap_pair_order
from metaxlm.pretrain.objectives import Prepared, register
from metaxlm.pretrain.objectives.mlm import MaskedLM, MaskingOptions


class TLMOptions(MaskingOptions):
    order: Literal["fixed", "shuffled"] = "fixed"


@register("tlm")
class TranslationLM(MaskedLM):
    batch_kind = "pair"
    Options = TLMOptions

    def prepare(self, batch, generator: torch.Generator) -> Prepared:
        if self.options.order == "fixed":
            return super().prepare(batch, generator)
        prepared = super().prepare(swap_pair_order(batch), generator)
        # which rows were reordered: an objective reading these inputs (dwa) reorders its view of the batch the same
        prepared.tensors["swapped"] = batch.tensors["swap"].clone()
        return prepared
