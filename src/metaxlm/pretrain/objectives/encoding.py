"""The encoder pass objectives compute their losses from, shared between objectives that see the same inputs.

Inside one forward of the engine's objective module (`shared_encodings()`), the first objective that encodes some
(input_ids, attention_mask) runs the encoder; any other objective asking for the same inputs gets that same pass
(the same hidden states, the same dropout masks). XLM-Align's TLM and denoising word alignment read one encoding of
the masked pair this way, as in the authors' code, instead of paying for a second forward and backward.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import torch

from metaxlm.models.arch import arch_of

_shared: ContextVar[list | None] = ContextVar("metaxlm_shared_encodings", default=None)


@contextmanager
def shared_encodings() -> Iterator[None]:
    token = _shared.set([])
    try:
        yield
    finally:
        _shared.reset(token)


def _same(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a is b or (a.shape == b.shape and torch.equal(a, b))


def encode(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None):
    """The model encoder's output (an HF BaseModelOutput with `hidden_states` of every layer: hidden_states[0] = the
    embeddings, [L] = after layer L) for these inputs; one pass per distinct input inside `shared_encodings()`."""
    cache = _shared.get()
    if cache is not None:
        for ids, mask, out in cache:
            if _same(ids, input_ids) and _same(mask, attention_mask):
                return out
    out = arch_of(model).encoder(model)(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
    if cache is not None:
        cache.append((input_ids, attention_mask, out))
    return out
