"""Knowledge distillation from the English teacher (the meta-pretrained model), on English rows only.

What is distilled: the teacher's sentence representation. For every English sequence of the batch, the
student's mean-pooled last hidden state (on the unmasked sequence) is pulled towards the teacher's
mean-pooled last hidden state of the same text, tokenized with the teacher's own tokenizer (the two
vocabularies differ, so token-level logits cannot be compared). Loss per English row: 1 − cosine
(DistilBERT's cosine embedding loss), so the multilingual model keeps the English model's sentence
geometry while it learns the other languages. Rows of other languages contribute nothing.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from metaxlm.pretrain.objectives import Objective, Prepared, register


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    mask = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)


@register("distill")
class Distill(Objective, torch.nn.Module):
    batch_kind = "mono"

    def __init__(self, tokenizer, teacher=None, teacher_tokenizer=None, language: str = "en", max_length: int = 512):
        torch.nn.Module.__init__(self)
        Objective.__init__(self, tokenizer)
        if teacher is None or teacher_tokenizer is None:
            raise ValueError("the distill objective needs a teacher model and its tokenizer")
        self.teacher = teacher.eval().requires_grad_(False)
        self.teacher_tokenizer, self.language, self.max_length = teacher_tokenizer, language, max_length

    def train(self, mode: bool = True):  # the teacher always runs in eval mode (no dropout)
        super().train(mode)
        self.teacher.eval()
        return self

    def prepare(self, batch, generator: torch.Generator) -> Prepared:
        texts = self.tokenizer.batch_decode(batch.input_ids, skip_special_tokens=True)
        is_src = torch.tensor([lang == self.language for lang in batch.langs])
        enc = self.teacher_tokenizer(texts, padding=True, truncation=True, max_length=self.max_length,
                                     return_tensors="pt")
        tensors = {"input_ids": batch.input_ids, "is_src": is_src, "teacher_ids": enc["input_ids"],
                   "teacher_mask": enc["attention_mask"]}
        return Prepared(tensors, int(is_src.sum()), list(batch.langs), targets="is_src")

    def loss_sum(self, model, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
        rows = tensors["is_src"]
        if not rows.any():  # keep every parameter in the graph so DDP's reducer stays in step
            return sum(p.sum() for p in model.base_model.embeddings.parameters()) * 0.0
        ids = tensors["input_ids"][rows]
        student = mean_pool(model.base_model(input_ids=ids).last_hidden_state, torch.ones_like(ids))
        with torch.no_grad():
            t_ids, t_mask = tensors["teacher_ids"][rows], tensors["teacher_mask"][rows]
            teacher = mean_pool(self.teacher.base_model(input_ids=t_ids, attention_mask=t_mask).last_hidden_state,
                                t_mask)
        return (1.0 - F.cosine_similarity(student.float(), teacher.float(), dim=-1)).sum()
