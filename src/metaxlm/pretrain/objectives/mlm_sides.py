"""MLM on each side of the translation pairs as its own sequence: PPA's "replace TLM by MLM" ablation (Table 5).

Pan et al. treat S_en and S_tr "from the parallel corpora as separate monolingual sequences and perform MLM on each
of them", with TLM's masking: the same text as TLM sees, without the cross-lingual context, so a gain of TLM over
this is the word-alignment signal, not more data. (`mlm` on `data.mono` is the other reading: MLM on monolingual
text.) Reads `pair_sides` batches: the same pairs, in the same order, as kinds `pair` and MoCo's.
"""

from __future__ import annotations

import torch

from metaxlm.data.padding import IGNORE
from metaxlm.pretrain.objectives import Prepared, register
from metaxlm.pretrain.objectives.mlm import MaskedLM, masked_lm_loss_sum


@register("mlm_sides")
class MaskedLMOnPairSides(MaskedLM):
    batch_kind = "pair_sides"

    def prepare(self, batch, generator: torch.Generator) -> Prepared:
        t = batch.tensors
        src_in, src_labels = self.mask(t["src_ids"], generator)
        tgt_in, tgt_labels = self.mask(t["tgt_ids"], generator)
        # one label tensor for both sides (the engine counts targets per row slice from it); loss_sum splits it
        labels = torch.cat([src_labels, tgt_labels], dim=1)
        tensors = {"src_ids": src_in, "src_mask": t["src_mask"], "tgt_ids": tgt_in, "tgt_mask": t["tgt_mask"],
                   "labels": labels}
        return Prepared(tensors, int((labels != IGNORE).sum()), list(batch.langs))

    def loss_sum(self, model, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
        width = tensors["src_ids"].shape[1]
        labels = tensors["labels"]
        return masked_lm_loss_sum(model, tensors["src_ids"], labels[:, :width], tensors["src_mask"]) + \
            masked_lm_loss_sum(model, tensors["tgt_ids"], labels[:, width:], tensors["tgt_mask"])
