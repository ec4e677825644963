"""Translation language modelling (XLM; Conneau & Lample 2019): MLM over a translation pair.

Each row holds ONE translation pair, `<s> src </s> tgt </s>` (the `pair` batch source; a pair is never split across
rows, padding is masked out by the attention mask), so a masked word can be predicted from its context in the same
language or from its translation, which encourages aligned representations. This is the setting of XLM's TLM and of
PPA (Pan et al. 2021: `S_a [SEP] S_b`). As in PPA and unlike XLM, positions are not reset at the target sentence and
there are no language embeddings (the encoders metaxlm trains have none). Masking and the masked-only output layer
are MLM's; only the data differs.
"""

from __future__ import annotations

from metaxlm.pretrain.objectives import register
from metaxlm.pretrain.objectives.mlm import MaskedLM


@register("tlm")
class TranslationLM(MaskedLM):
    batch_kind = "pair"
