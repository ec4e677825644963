"""Translation language modelling (XLM; Conneau & Lample 2019): MLM over a translation pair.

Each packed text is `src </s> tgt` from the parallel data, so a masked word can be predicted from its
context in the same language or from its translation, which encourages aligned representations.
Masking and the masked-only output layer are MLM's; only the data differs (batch_kind "parallel").
"""

from __future__ import annotations

from metaxlm.pretrain.objectives import register
from metaxlm.pretrain.objectives.mlm import MaskedLM


@register("tlm")
class TranslationLM(MaskedLM):
    batch_kind = "parallel"
