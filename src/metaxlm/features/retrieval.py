"""Sentence retrieval layer by layer (Tatoeba protocol): mean-pooled hidden states, cosine nearest neighbour,
accuracy@1 in both directions, every layer from one forward pass over both sides; on a whole set
(`retrieval_by_layer`) or on its dev and test parts apart (`retrieval_dev_test`: the evaluation's, so that the
reported layer is chosen on dev and scored on test)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from metaxlm.config import INFERENCE_BATCH_TOKENS
from metaxlm.data.examples import dev_test_split
from metaxlm.errors import MetaXLMError
from metaxlm.features.layers import encode_layers
from metaxlm.metrics import accuracy_at_1, gold_ranks


def _pair_vectors(model, tokenizer, src: Sequence[str], tgt: Sequence[str], **encoding) -> dict[int, torch.Tensor]:
    """{layer: the n source sentences' vectors, then the n target ones'} from one encoder pass over both sides."""
    if len(src) != len(tgt) or not src:
        raise MetaXLMError(f"retrieval needs the same non-zero number of sentences on both sides, "
                           f"got {len(src)} and {len(tgt)}")
    return encode_layers(model, tokenizer, [*src, *tgt], **encoding)


def retrieval_by_layer(model, tokenizer, src: Sequence[str], tgt: Sequence[str], *,
                       layers: Sequence[int] | None = None, batch_size: int = 64,
                       batch_tokens: int | None = INFERENCE_BATCH_TOKENS, pooling: str = "mean",
                       max_length: int = 512, precision: str = "auto", progress: bool = False,
                       ranks: bool = False) -> dict:
    """src[i] and tgt[i] are translations. Returns {"layers", "src2tgt", "tgt2src", "mean"}: lists of
    accuracy@1 fractions, one per layer (0 = embeddings; default: every layer). With `ranks`, also "ranks": per
    layer, each pair's [rank of tgt[i] for src[i], rank of src[i] for tgt[i]] (1: retrieved first; metrics.gold_ranks),
    the per-pair outcomes whose share of 1s is "mean"."""
    vectors = _pair_vectors(model, tokenizer, src, tgt, layers=layers, batch_size=batch_size,
                            batch_tokens=batch_tokens, pooling=pooling, max_length=max_length, precision=precision,
                            progress=progress)
    return {"layers": list(vectors), **_part_scores(vectors, len(src), range(len(src)), ranks)}


def _part_scores(vectors: dict[int, torch.Tensor], n: int, part: range, ranks: bool) -> dict:
    """accuracy@1 per layer of the pairs at positions `part`, retrieved among that part only (vectors: the n
    source sentences, then the n target ones)."""
    index = torch.as_tensor(list(part), dtype=torch.long)
    result: dict[str, list] = {"src2tgt": [], "tgt2src": [], "mean": [], **({"ranks": []} if ranks else {})}
    for v in vectors.values():
        v = F.normalize(v, dim=-1)
        similarity = v[index] @ v[n + index].T  # cosine, among the part's pairs
        src2tgt, tgt2src = accuracy_at_1(similarity), accuracy_at_1(similarity.T)
        result["src2tgt"].append(src2tgt)
        result["tgt2src"].append(tgt2src)
        result["mean"].append((src2tgt + tgt2src) / 2)
        if ranks:
            result["ranks"].append([list(pair) for pair in zip(gold_ranks(similarity), gold_ranks(similarity.T),
                                                               strict=True)])
    return result


def retrieval_dev_test(model, tokenizer, src: Sequence[str], tgt: Sequence[str], *, dev_fraction: float,
                       layers: Sequence[int] | None = None, batch_size: int = 64,
                       batch_tokens: int | None = INFERENCE_BATCH_TOKENS, pooling: str = "mean",
                       max_length: int = 512, precision: str = "auto", progress: bool = False) -> dict:
    """Retrieval on a set's dev part and on its test part (`data.examples.dev_test_split`: its first pairs are dev,
    by the file order alone) from ONE encoder pass over both: each part is retrieved among its own pairs, so a dev
    sentence is never a distractor of a test query. {"layers", "pairs": {"dev", "test"}, "test": {"src2tgt",
    "tgt2src", "mean", "ranks"}, "dev": the same without ranks (absent without a dev part)}."""
    vectors = _pair_vectors(model, tokenizer, src, tgt, layers=layers, batch_size=batch_size,
                            batch_tokens=batch_tokens, pooling=pooling, max_length=max_length, precision=precision,
                            progress=progress)
    dev, test = dev_test_split(len(src), dev_fraction)
    result = {"layers": list(vectors), "pairs": {"dev": len(dev), "test": len(test)},
              "test": _part_scores(vectors, len(src), test, ranks=True)}
    if dev:
        result["dev"] = _part_scores(vectors, len(src), dev, ranks=False)
    return result
