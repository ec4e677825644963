"""Knowledge distillation from an English teacher (by default the run's meta-pretrained model), on English rows.

What is distilled: the teacher's sentence representation. For every English sequence of the batch, the
student's mean-pooled last hidden state (on the unmasked sequence) is pulled towards the teacher's
mean-pooled last hidden state of the same text, tokenized with the teacher's own tokenizer (the two
vocabularies differ, so token-level logits cannot be compared). Loss per English row: 1 − cosine
(DistilBERT's cosine embedding loss), so the multilingual model keeps the English model's sentence
geometry while it learns the other languages. Rows of other languages contribute nothing.

Config: `train.objectives.distill: {weight: 0.5, teacher: meta}` (`teacher`: `meta`, a variant of the run, or an HF
model directory; `language`: default data.pivot). A variant's `distill: 0.5` is the short form of that.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from pydantic import Field

from metaxlm.models.arch import arch_of
from metaxlm.models.pooling import mean_pool
from metaxlm.pretrain.objectives import ObjectiveOptions, Prepared, register
from metaxlm.pretrain.objectives.base import Objective


class DistillOptions(ObjectiveOptions):
    teacher: str = "meta"
    language: str | None = None  # default: data.pivot
    max_length: int = Field(512, ge=8)


@register("distill")
class Distill(Objective):
    batch_kind = "mono"
    Options = DistillOptions
    constant_modules = ("teacher",)  # frozen, loaded from `teacher` again on resume

    def __init__(self, options: DistillOptions, context, teacher=None, teacher_tokenizer=None):
        super().__init__(options, context)
        if teacher is None:
            from transformers import AutoModel, AutoTokenizer

            from metaxlm.models.loading import check_vocabulary_fits, load_pretrained, quiet_transformers

            path = context.resolve_model(options.teacher)
            with quiet_transformers():
                teacher = load_pretrained(AutoModel, path)
            teacher_tokenizer = AutoTokenizer.from_pretrained(str(path))
            check_vocabulary_fits(teacher, teacher_tokenizer, path)
        student_size = getattr(context.model_config, "hidden_size", None)
        if student_size is not None and teacher.config.hidden_size != student_size:
            from metaxlm.errors import ConfigError

            raise ConfigError(f"train.objectives.distill.teacher: the teacher's hidden size "
                              f"({teacher.config.hidden_size}) differs from the model's ({student_size}); sentence "
                              f"representations are compared by cosine, so they must have the same size")
        self.teacher = teacher.eval().requires_grad_(False)
        self.teacher_tokenizer = teacher_tokenizer
        self.language = options.language or context.pivot

    def train(self, mode: bool = True):  # the teacher always runs in eval mode (no dropout)
        super().train(mode)
        self.teacher.eval()
        return self

    def prepare(self, batch, generator: torch.Generator) -> Prepared:
        is_src = torch.tensor([lang == self.language for lang in batch.langs])
        return Prepared({"input_ids": batch.input_ids, "is_src": is_src}, int(is_src.sum()), list(batch.langs),
                        target_key="is_src")

    def label(self, model, part: Prepared) -> Prepared:
        """The teacher's tokenization of this process's English rows only (per-row work, done where the rows are)."""
        rows = part.tensors["is_src"]
        texts = self.tokenizer.batch_decode(part.tensors["input_ids"][rows], skip_special_tokens=True)
        enc = self.teacher_tokenizer(texts or [""], padding=True, truncation=True, max_length=self.options.max_length,
                                     return_tensors="pt")
        device = part.tensors["input_ids"].device  # the teacher's inputs go where the rows are
        return Prepared({**part.tensors, "teacher_ids": enc["input_ids"][:len(texts)].to(device),
                         "teacher_mask": enc["attention_mask"][:len(texts)].to(device)}, part.num_targets, part.langs,
                        part.target_key)

    def loss_sum(self, model, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
        rows = tensors["is_src"]
        encoder = arch_of(model).encoder(model)
        if not rows.any():  # keep the encoder in the graph, so a lone distill objective keeps DDP's reducer in step
            return sum(p.sum() for p in encoder.embeddings.parameters()) * 0.0
        ids = tensors["input_ids"][rows]
        student = mean_pool(encoder(input_ids=ids).last_hidden_state, torch.ones_like(ids))
        with torch.no_grad():
            t_ids, t_mask = tensors["teacher_ids"], tensors["teacher_mask"]
            teacher = mean_pool(arch_of(self.teacher).encoder(self.teacher)(input_ids=t_ids, attention_mask=t_mask)
                                .last_hidden_state, t_mask)
        return (1.0 - F.cosine_similarity(student.float(), teacher.float(), dim=-1)).sum()
