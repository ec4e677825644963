"""The vocabulary a continued model is exported with (`vocab.export`).

A variant that continues a pretrained model (`start_from`) in a run whose vocabulary is a trim of the start's
(`vocab.trim: true`) trains the start's rows of the pieces its corpus uses (pretrain.variant.load_start_model selects
them). The trimmed unigram vocabulary segments the corpus exactly as the full one does (vocab/trim.py), so the
training inputs only ever hold corpus pieces, and that compact model is the start model with ALL its rows whose MLM
output softmax (and random-replacement tokens) is restricted to the corpus pieces: the one vocabulary-sized
computation runs over the corpus pieces only, at the cost of a model of the trimmed size.

`FullVocabulary` exports it as such (`vocab.export: full`, the default): the trained rows go back to their ids in the
start's matrices (input embeddings, output bias, an untied output layer), every other row stays exactly the start's,
and the directory gets the start's full tokenizer, so a piece the corpus never used reads as it did in the start
instead of becoming `<unk>`. The engine writes final/ through it (`pretrain(export=...)`), `save_start_model` the
`start_of:<variant>` reference; checkpoints (ckpt/) keep the compact model, which is what `--resume` continues, and
their evaluation reads a full-vocabulary copy written beside them on first use (so that every point of a variant's
curve against pretraining steps, final/ included, reads text the same way).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from metaxlm.io import atomic_dir
from metaxlm.models import arch_of  # (with the VECO model type registered for AutoModelForMaskedLM)

CHECKPOINT_SUBDIR = "full_vocabulary"  # in ckpt/step_N/: the checkpoint as final/ would hold it


@dataclass(frozen=True)
class FullVocabulary:
    start_dir: Path               # the start model as continued (an encoder without MLM head: its import, fresh head)
    tokenizer_dir: Path           # the start's full tokenizer (<run>/vocab/untrimmed)
    new_to_old: tuple[int, ...]   # training id -> the start's id (trim_map.json)

    def expanded(self, model: nn.Module, state_dict: dict | None = None) -> nn.Module:
        """A copy of the trained `model` (its weights, or `state_dict`: the gathered weights of a sharded model)
        with the start's full vocabulary; `model` itself is not changed (the engine still evaluates it)."""
        from transformers import AutoModelForMaskedLM

        from metaxlm.models.loading import load_pretrained, quiet_transformers

        with torch.random.fork_rng(devices=[]):  # its fresh weights are all overwritten; the caller's RNG is not
            whole = type(model)(copy.deepcopy(model.config))
        missing, unexpected = whole.load_state_dict(state_dict if state_dict is not None else model.state_dict(),
                                                    strict=False)
        kept = dict(whole.named_parameters())  # a tied parameter is listed once: its other names may be missing
        tied = [name for name, _ in whole.named_parameters(remove_duplicate=False) if name not in kept]
        if unexpected or set(missing) - set(tied):
            raise RuntimeError(f"internal error: the trained weights do not fit a copy of their model (missing "
                               f"{sorted(set(missing) - set(tied))[:4]}, unexpected {unexpected[:4]})")
        whole.tie_weights()
        with quiet_transformers():
            start = load_pretrained(AutoModelForMaskedLM, self.start_dir)
        arch_of(whole).expand_vocabulary(whole, start, list(self.new_to_old))
        return whole.eval()

    def export(self, model: nn.Module, tokenizer, out_dir: str | Path, state_dict: dict | None = None) -> None:
        """What the engine calls to write final/ (the signature of `ModelArch.export`): `model` with the start's full
        vocabulary and the start's full tokenizer (`tokenizer`, the trimmed training one, is not written)."""
        from metaxlm.vocab import load_tokenizer

        whole = self.expanded(model, state_dict)
        # the export keeps the start tokenizer's sentencepiece model beside each tokenizer (vocab.load.save_tokenizer)
        arch_of(whole).export(whole, load_tokenizer(self.tokenizer_dir), out_dir)

    def checkpoint_dir(self, checkpoint: str | Path) -> Path:
        """A training checkpoint (compact) exported as final/ would be, written once into its `full_vocabulary/`
        (model and tokenizer; for VECO the NLU export, as final/): what evaluations of that checkpoint read."""
        from transformers import AutoModelForMaskedLM

        from metaxlm.models.loading import load_pretrained, quiet_transformers

        out = Path(checkpoint) / CHECKPOINT_SUBDIR
        if not (out / "config.json").exists():
            with quiet_transformers():
                model = load_pretrained(AutoModelForMaskedLM, checkpoint)
            with atomic_dir(out) as tmp:
                self.export(model, None, tmp)
        return out
