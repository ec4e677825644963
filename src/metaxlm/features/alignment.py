"""Word alignment from encoder hidden states, layer by layer: XLM-Align's optimal-transport aligner ("ot", the
default) and SimAlign's "argmax" and "itermax" (the link methods live in `metaxlm.alignment`), scored against
gold links, plus the standalone aligner behind `metaxlm align`.

Each side is encoded on its own (each distinct sentence once, bf16, the encoder stopping at the highest layer
needed); sub-word similarity matrices of a batch of pairs are padded and aligned together; sub-word links
become word links: two sub-words aligned ⇒ their words aligned.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import chain, islice, zip_longest
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from metaxlm.alignment import (
    FILTERINGS,
    KERNELS,
    WordPieces,
    argmax_links,
    itermax_links,
    ot_links,
    pair_batch,
    word_links,
    word_pieces,
)
from metaxlm.config import INFERENCE_BATCH_TOKENS
from metaxlm.config.alignment_defaults import (  # chosen on dev: see that module
    DEFAULT_ALPHA,
    DEFAULT_EPS,
    DEFAULT_LAYER_FRACTION,
    DEFAULT_MAX_COUNT,
    DEFAULT_N_ITER,
)
from metaxlm.data.examples import DEV_FRACTION, AlignmentSet, dev_test_split
from metaxlm.data.padding import length_sorted_batches
from metaxlm.data.readers import iter_lines
from metaxlm.errors import ConfigError, DataError, MetaXLMError
from metaxlm.features.layers import (
    LayerRunner,
    inference,
    inference_precision,
    load_encoder,
    max_positions,
    num_layers,
    pad_batch,
    pad_id,
    resolve_layers,
)
from metaxlm.metrics import alignment_counts, alignment_scores, lowest_aer_layer
from metaxlm.records import CHOSEN_ON_DEV, FIXED_DEFAULT

__all__ = ["AlignedFile", "EncodedPairs", "WordAligner", "align_file", "alignment_by_layer", "alignment_dev_test",
           "counts_by_layer", "default_layer", "format_dev_scores", "read_pairs", "scores_by_layer", "token_states"]

METHODS = ("ot", "argmax", "itermax")

Links = set[tuple[int, int]]


@dataclass(frozen=True)
class EncodedPairs:
    """Sentence pairs encoded once (`WordAligner.encode`): per layer the states of every distinct sentence, its
    sub-words' word indices, and which sentence each pair's source and target side is."""

    states: dict[int, list[torch.Tensor]]
    words: list[torch.Tensor]
    src_ids: list[int]
    tgt_ids: list[int]

    def subset(self, part: range) -> EncodedPairs:
        """The pairs at the positions of `part`, sharing the states (e.g. to align a dev part alone)."""
        return EncodedPairs(self.states, self.words, [self.src_ids[k] for k in part],
                            [self.tgt_ids[k] for k in part])


def default_layer(model) -> int:
    return max(1, round(num_layers(model) * DEFAULT_LAYER_FRACTION))


class WordAligner:
    """Aligns pre-split sentence pairs; `align` gives one layer's links, `align_layers` several from one pass.
    `eps` (the paper's μ), `n_iter` (Sinkhorn iterations), `alpha` and `max_count` (filtering iterations) are the
    OT aligner's (max_count 1: the plain argmax intersection of the plan; 2 with α 0.9: XLM-Align's self-labelling
    setting); `kernel`: "cosine" (K = exp(cos/μ), the default) or "paper" (XLM-Align's Eq. 1/5, K = max(ε, h·h)^(1/μ)
    on the raw states); `filtering`: "released" (the authors' itermax), "eq9" (Eq. 9 literally) or "none" (union).
    itermax uses SimAlign's α = 0.9, 2 rounds."""

    def __init__(self, model, tokenizer, *, layer: int | None = None, method: str = "ot", eps: float = DEFAULT_EPS,
                 n_iter: int = DEFAULT_N_ITER, alpha: float = DEFAULT_ALPHA, max_count: int = DEFAULT_MAX_COUNT,
                 kernel: str = "cosine", filtering: str = "released", epsilon: float = 1e-6,
                 batch_size: int = 64, pair_batch_size: int = 256, max_length: int = 512, precision: str = "auto"):
        if method not in METHODS:
            raise ConfigError(f"alignment method must be one of {METHODS}, got {method!r}")
        if kernel not in KERNELS:
            raise ConfigError(f"alignment kernel must be one of {KERNELS}, got {kernel!r}")
        self.kernel, self.epsilon = kernel, epsilon
        self.model, self.tokenizer = model, tokenizer
        self.layer = default_layer(model) if layer is None else resolve_layers(model, [layer])[0]
        self.method = method
        self._set_links_settings(eps=eps, n_iter=n_iter, alpha=alpha, max_count=max_count, filtering=filtering)
        self.batch_size, self.pair_batch_size = batch_size, pair_batch_size
        self.max_length, self.precision = max_length, inference_precision(model, precision)
        self.encoder, self.encoder_precision = model, self.precision
        if self.precision == "bf16" and next(model.parameters()).device.type == "cpu":
            # A bf16 copy of the encoder, made once: under autocast every weight is re-cast to bf16 on every
            # call, which costs ~10-40% of the aligner's time on CPU (AER unchanged within 0.1 point on de-en).
            self.encoder, self.encoder_precision = copy.deepcopy(model).to(torch.bfloat16).eval(), "native"

    def _set_links_settings(self, *, eps: float, n_iter: int, alpha: float, max_count: int, filtering: str) -> None:
        if eps <= 0 or n_iter < 0 or not 0 <= alpha <= 1 or max_count < 1:
            raise ConfigError(f"need eps > 0, n_iter >= 0, 0 <= alpha <= 1, max_count >= 1; got eps={eps}, "
                              f"n_iter={n_iter}, alpha={alpha}, max_count={max_count}")
        if filtering not in FILTERINGS:
            raise ConfigError(f"alignment filtering must be one of {FILTERINGS}, got {filtering!r}")
        self.eps, self.n_iter, self.alpha, self.max_count, self.filtering = eps, n_iter, alpha, max_count, filtering

    def with_links_settings(self, **settings) -> WordAligner:
        """A copy with other OT link settings (eps, n_iter, alpha, max_count, filtering) sharing this aligner's
        encoder: states from `encode` stay valid for it, so a sweep over these settings encodes once."""
        other = copy.copy(self)
        current = {k: getattr(self, k) for k in ("eps", "n_iter", "alpha", "max_count", "filtering")}
        other._set_links_settings(**{**current, **settings})
        return other

    def links(self, sim: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Boolean (batch, m, n) sub-word links of a padded batch of similarity matrices (cosines; dot products of
        the raw states for the paper's kernel)."""
        if self.method == "argmax":
            return argmax_links(sim, mask)
        if self.method == "itermax":
            return itermax_links(sim, mask)
        if self.kernel == "paper":  # f_sim = log max(ε, h·h): log K = f_sim / μ
            sim = sim.float().clamp(min=self.epsilon).log()
        return ot_links(sim, mask, eps=self.eps, n_iter=self.n_iter, alpha=self.alpha, max_count=self.max_count,
                        filtering=self.filtering)

    def align(self, src_words: Sequence[Sequence[str]], tgt_words: Sequence[Sequence[str]], layer: int | None = None,
              progress: bool = False) -> list[Links]:
        """0-based (source word, target word) links per pair, at `layer` (default: the aligner's)."""
        layer = self.layer if layer is None else layer
        return self.align_layers(src_words, tgt_words, [layer], progress=progress)[layer]

    def align_layers(self, src_words: Sequence[Sequence[str]], tgt_words: Sequence[Sequence[str]],
                     layers: Sequence[int] | None = None, progress: bool = False) -> dict[int, list[Links]]:
        """{layer: links per pair} for every requested layer (default: all), from one encoder pass."""
        encoded = self.encode(src_words, tgt_words, layers, progress=progress)
        return {layer: self.links_at(encoded, layer) for layer in encoded.states}

    def score_layers(self, aset: AlignmentSet, layers: Sequence[int] | None = None,
                     progress: bool = False) -> dict[str, list]:
        """{"layers", "aer", "precision", "recall", "f1"}: per layer (default: all), the scores against the gold
        links of the whole of `aset`, from one encoder pass."""
        predictions = self.align_layers(aset.src, aset.tgt, layers, progress=progress)
        return {"layers": list(predictions), **scores_by_layer(predictions, aset)}

    def encode(self, src_words: Sequence[Sequence[str]], tgt_words: Sequence[Sequence[str]],
               layers: Sequence[int] | None = None, progress: bool = False) -> EncodedPairs:
        """The states of the pairs at the requested layers (default: all), each distinct sentence encoded once."""
        if len(src_words) != len(tgt_words):
            raise MetaXLMError(f"{len(src_words)} source but {len(tgt_words)} target sentences")
        layers = resolve_layers(self.model, layers)
        index: dict[tuple[str, ...], int] = {}
        for words in chain(src_words, tgt_words):
            index.setdefault(tuple(words), len(index))
        pieces = word_pieces(self.tokenizer, list(index), max_positions(self.model, self.tokenizer, self.max_length))
        states = token_states(self.encoder, self.tokenizer, pieces, layers, batch_size=self.batch_size,
                              precision=self.encoder_precision, progress=progress,
                              normalize=not (self.method == "ot" and self.kernel == "paper"))
        return EncodedPairs(states, [torch.tensor(p.words, dtype=torch.long) for p in pieces],
                            [index[tuple(words)] for words in src_words], [index[tuple(words)] for words in tgt_words])

    def links_at(self, encoded: EncodedPairs, layer: int) -> list[Links]:
        """Word links per pair of `encoded` at one of its layers, with this aligner's link settings."""
        return self._word_links(encoded.states[layer], encoded.words, encoded.src_ids, encoded.tgt_ids)

    def _word_links(self, states: list[torch.Tensor], words: list[torch.Tensor], src_ids: list[int],
                    tgt_ids: list[int]) -> list[Links]:
        result: list[Links] = [set() for _ in src_ids]
        sizes = [len(words[s]) * len(words[t]) for s, t in zip(src_ids, tgt_ids, strict=True)]
        for batch in length_sorted_batches(sizes, self.pair_batch_size):
            batch = [p for p in batch if sizes[p]]  # a pair with an empty side has no links
            if not batch:
                continue
            pairs = pair_batch([states[src_ids[p]] for p in batch], [states[tgt_ids[p]] for p in batch],
                               [words[src_ids[p]] for p in batch], [words[tgt_ids[p]] for p in batch])
            found = word_links(self.links(pairs.sim, pairs.mask), pairs.src_words, pairs.tgt_words)
            for p, links in zip(batch, found, strict=True):
                result[p] = links
        return result


def token_states(model, tokenizer, sentences: Sequence[WordPieces], layers: Sequence[int], *, batch_size: int = 64,
                 batch_tokens: int | None = INFERENCE_BATCH_TOKENS, precision: str = "auto", progress: bool = False,
                 normalize: bool = True) -> dict[int, list[torch.Tensor]]:
    """{layer: [per sentence (n_kept_tokens, hidden) states]} from one forward pass per batch of rows: unit vectors
    (dot products are cosines), or the raw states with `normalize=False`."""
    rows = [(k, r) for k, s in enumerate(sentences) for r in range(len(s.rows))]
    lengths = [len(sentences[k].rows[r]) for k, r in rows]
    parts: dict[int, dict[tuple[int, int], torch.Tensor]] = {layer: {} for layer in layers}
    runner = LayerRunner(model, layers)
    with inference(model, precision):
        for batch in tqdm(length_sorted_batches(lengths, batch_size, batch_tokens), desc="encode", unit="batch",
                          disable=not progress):
            input_ids, attention_mask = pad_batch([sentences[rows[b][0]].rows[rows[b][1]] for b in batch],
                                                  pad_id(tokenizer))
            for layer, states in runner(input_ids, attention_mask).items():
                for position, b in enumerate(batch):
                    k, r = rows[b]
                    start, end = sentences[k].spans[r]
                    parts[layer][k, r] = states[position, start:end].cpu().clone()  # not a view of the padded batch
    hidden = model.config.hidden_size
    out: dict[int, list[torch.Tensor]] = {}
    for layer in layers:
        out[layer] = []
        for k, s in enumerate(sentences):
            tokens = [parts[layer][k, r] for r in range(len(s.rows))]
            states = torch.cat(tokens)[s.keep] if tokens else torch.zeros(0, hidden)
            out[layer].append(F.normalize(states, dim=-1) if normalize else states)
    return out


def scores_by_layer(predictions: dict[int, list[Links]], aset: AlignmentSet,
                    part: range | None = None) -> dict[str, list[float]]:
    """AER, precision, recall and F1 (fractions) per layer, in the order of `predictions` ({layer: links per pair of
    `aset`}), against the gold links of the pairs `part` of `aset` (default: all)."""
    part = range(len(aset)) if part is None else part
    gold = aset.subset(part)
    result: dict[str, list[float]] = {"aer": [], "precision": [], "recall": [], "f1": []}
    for pred in predictions.values():
        for key, value in alignment_scores([pred[k] for k in part], gold.sure, gold.possible).items():
            result[key].append(value)
    return result


def counts_by_layer(predictions: dict[int, list[Links]], aset: AlignmentSet, part: range | None = None) -> list:
    """Per layer (in the order of `predictions`), each pair of `part` (default: all)'s [|A∩S|, |A∩P|, |A|, |S|]
    (metrics.alignment_counts): the per-pair outcomes whose sums give `scores_by_layer`'s AER."""
    part = range(len(aset)) if part is None else part
    gold = aset.subset(part)
    return [alignment_counts([pred[k] for k in part], gold.sure, gold.possible) for pred in predictions.values()]


def alignment_by_layer(model, tokenizer, aset: AlignmentSet, *, method: str = "ot",
                       layers: Sequence[int] | None = None, batch_size: int = 64, progress: bool = False,
                       **settings) -> dict[str, list]:
    """AER, precision, recall and F1 (fractions) against the gold links of the whole of `aset`, per layer
    (default: all), from one encoder pass. `settings`: WordAligner keywords (eps, n_iter, alpha, max_count,
    precision, ...)."""
    return WordAligner(model, tokenizer, method=method, batch_size=batch_size, **settings).score_layers(
        aset, layers, progress=progress)


def alignment_dev_test(model, tokenizer, aset: AlignmentSet, *, dev_fraction: float = DEV_FRACTION,
                       method: str = "ot", layers: Sequence[int] | None = None, batch_size: int = 64,
                       progress: bool = False, **settings) -> dict:
    """Per-layer scores on the dev and the test part of `aset` (`dev_test_split`) from one encoder pass over the
    whole set, and the layer to report: the lowest dev AER (ties: the shallower), or with no dev part
    (dev_fraction 0, or a one-pair set) the aligner's fixed default layer, which must then be among `layers`.
    {"layers", "split": {dev_fraction, dev_pairs, test_pairs}, "dev": scores (only with a dev part), "test": scores,
    "chosen_layer", "chosen_on": "dev" | "fixed default", "items": {"kind": "aer", "layers", "rows": the test pairs'
    counts per layer (`counts_by_layer`)}}; scores as `scores_by_layer`."""
    aligner = WordAligner(model, tokenizer, method=method, batch_size=batch_size, **settings)
    layers = resolve_layers(model, layers)
    dev, test = dev_test_split(len(aset), dev_fraction)
    if not dev and aligner.layer not in layers:
        raise ConfigError(f"without a dev part the alignment is reported at the default layer {aligner.layer}, "
                          f"which the evaluated layers {layers} leave out: add it, or set a dev_fraction above 0")
    predictions = aligner.align_layers(aset.src, aset.tgt, layers, progress=progress)
    result: dict = {"layers": layers, "split": {"dev_fraction": dev_fraction, "dev_pairs": len(dev),
                                                "test_pairs": len(test)}}
    if dev:
        result["dev"] = scores_by_layer(predictions, aset, dev)
        chosen = lowest_aer_layer(layers, result["dev"]["aer"]), CHOSEN_ON_DEV
    else:
        chosen = aligner.layer, FIXED_DEFAULT
    result["test"] = scores_by_layer(predictions, aset, test)
    result["chosen_layer"], result["chosen_on"] = chosen
    # each test pair's counts: what the report's paired bootstrap resamples (records.AlignmentItems)
    result["items"] = {"kind": "aer", "layers": layers, "rows": counts_by_layer(predictions, aset, test)}
    return result


# --- the standalone aligner (`metaxlm align`) ------------------------------------------------------------

def read_pairs(src_path: str | Path, tgt_path: str | Path | None) -> Iterator[tuple[list[str], list[str]]]:
    """Whitespace-split sentence pairs: "source ||| target" lines (fast_align format) when `tgt_path` is None,
    else two line-aligned files. Bad lines raise DataError(file, line, message)."""
    if tgt_path is None:
        for line_no, line in iter_lines(src_path):
            sides = line.split("|||")
            if len(sides) != 2:
                raise DataError(src_path, line_no, f"expected 'source ||| target', found {len(sides) - 1} '|||'")
            yield sides[0].split(), sides[1].split()
        return
    end = (None, None)
    for (src_no, src), (tgt_no, tgt) in zip_longest(iter_lines(src_path), iter_lines(tgt_path), fillvalue=end):
        if src is None or tgt is None:
            short, n = (src_path, tgt_no - 1) if src is None else (tgt_path, src_no - 1)
            raise DataError(short, n, f"file ends here, but {src_path} and {tgt_path} must have the same lines")
        yield src.split(), tgt.split()


@dataclass(frozen=True)
class AlignedFile:
    """What `align_file` did: the pairs written, the layer used, the per-layer dev scores it was chosen by (when
    given a dev set) and the scores of the written links against the input's gold (when given one)."""

    pairs: int
    layer: int
    dev_scores: dict | None = None
    scores: dict | None = None


def align_file(model_dir: str | Path, src_path: str | Path, tgt_path: str | Path | None, out_path: str | Path, *,
               layer: int | None = None, dev: AlignmentSet | None = None, gold: AlignmentSet | None = None,
               method: str = "ot", batch_size: int = 64, tokenizer_dir: str | Path | None = None,
               progress: bool = True, block_size: int = 4096, **settings) -> AlignedFile:
    """Align every pair of the input (see `read_pairs`) and write one line of 0-based Pharaoh "i-j" links per
    pair to `out_path` (atomically). The input is checked whole before the model loads.

    The layer: `layer`, or with a `dev` set (gold links for other pairs) the one of lowest AER on it (ties: the
    shallower), its per-layer dev scores printed; else the aligner's default. With `gold` (the input's own gold
    links) the written links are scored against it."""
    from metaxlm.io import atomic_path

    if layer is not None and dev is not None:
        raise ConfigError("align: give a layer or a dev set to choose it on, not both")
    if dev is not None and not len(dev):
        raise ConfigError("align: the dev set has no sentence pairs to choose the layer on")
    n_pairs = sum(1 for _ in read_pairs(src_path, tgt_path))
    if gold is not None and len(gold) != n_pairs:
        raise ConfigError(f"align: the gold set has {len(gold)} pairs, the input {src_path} {n_pairs}")
    model, tokenizer = load_encoder(model_dir, tokenizer_dir)
    aligner = WordAligner(model, tokenizer, layer=layer, method=method, batch_size=batch_size, **settings)
    dev_scores = None
    if dev is not None:
        dev_scores = aligner.score_layers(dev, progress=progress)
        aligner.layer = lowest_aer_layer(dev_scores["layers"], dev_scores["aer"])
        print(format_dev_scores(dev_scores, aligner.layer, len(dev)), flush=True)
    pairs = read_pairs(src_path, tgt_path)
    written: list[Links] = []  # kept only to score against `gold`
    with atomic_path(out_path) as tmp, open(tmp, "w", encoding="utf-8") as out, \
            tqdm(total=n_pairs, desc=f"align ({method}, layer {aligner.layer})", unit=" pairs",
                 disable=not progress) as bar:
        while block := list(islice(pairs, block_size)):  # blocks bound the memory for big files
            src, tgt = [s for s, _ in block], [t for _, t in block]
            for links in aligner.align(src, tgt):
                out.write(" ".join(f"{i}-{j}" for i, j in sorted(links)) + "\n")
                if gold is not None:
                    written.append(links)
            bar.update(len(block))
    scores = alignment_scores(written, gold.sure, gold.possible) if gold is not None else None
    return AlignedFile(n_pairs, aligner.layer, dev_scores, scores)


def format_dev_scores(dev_scores: dict, chosen: int, n_pairs: int) -> str:
    """The per-layer dev AER table `metaxlm align --layer dev` prints, and the layer chosen."""
    rows = [f"{'layer':>5}  {'dev AER %':>9}"]
    rows += [f"{layer:>5}  {100 * aer:>9.1f}{'  <- chosen' if layer == chosen else ''}"
             for layer, aer in zip(dev_scores["layers"], dev_scores["aer"], strict=True)]
    return "\n".join([f"AER on the dev set ({n_pairs} pairs), per layer:", *rows,
                      f"layer {chosen}: lowest dev AER (ties: the shallower layer)"])
