"""Initialize a multilingual BertForMaskedLM from an English (meta-pretrained) source model.

Parameters fall in two groups:

* the **body** -- everything except the word embeddings and the MLM decoder bias: the encoder layers,
  the position and token-type embeddings (the first min(n_source, n_target) rows), the embedding
  LayerNorm and the MLM head transform (dense + LayerNorm);
* the **embeddings** -- the word embeddings (tied to the MLM decoder weight) and the decoder bias, whose
  rows are per-vocabulary and are mapped through a `VocabMatch`: target row t = mean of the source rows
  `match.sources[t]`.

Modes: "none" (random init, the XLM baseline), "body", "emb", "both" (MetaXLM).

Against the paper (MetaXLM, §3.2 and Table 5: "Body" = the Transformer body, "Emb" = the word
embeddings): it does not say where the position/token-type embeddings, the embedding LayerNorm and the MLM
head transform go; here they go with the body, as they are vocabulary-independent. It does not say what
unmatched word embeddings get either: here the target's own random init or the mean of the matched rows
(`fallback`). Its frozen variant updates "only the embedding layers and the language modeling head";
`freeze_body` reads that as the word embeddings and the MLM head (transform + decoder bias), so the
position/token-type embeddings and the embedding LayerNorm stay frozen with the encoder.
"""

from __future__ import annotations

from typing import Literal

import torch

from metaxlm.errors import MetaXLMError
from metaxlm.models.arch import arch_of, arch_or_none
from metaxlm.transfer.vocab_match import VocabMatch

__all__ = ["body_parameter_names", "embedding_parameter_names", "freeze_body", "initialize_from_source"]

MODES = ("none", "body", "emb", "both")
FALLBACKS = ("random", "mean")
HEAD_TRANSFORM = "cls.predictions.transform."
WORD_EMBEDDINGS = "bert.embeddings.word_embeddings.weight"
DECODER_BIAS = "cls.predictions.bias"
_ROW_COPIED = ("bert.embeddings.position_embeddings.weight", "bert.embeddings.token_type_embeddings.weight")


def _embedding_params(model) -> list[torch.nn.Parameter]:
    """The per-vocabulary parameters: input embeddings, output embeddings (if untied) and decoder bias."""
    params = [model.get_input_embeddings().weight]
    out = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if out is not None:
        params.append(out.weight)
        if out.bias is not None:
            params.append(out.bias)
    cls = getattr(model, "cls", None)
    bias = getattr(getattr(cls, "predictions", None), "bias", None)
    if isinstance(bias, torch.nn.Parameter):
        params.append(bias)
    return params


def embedding_parameter_names(model) -> list[str]:
    """Names of the word embeddings and the decoder bias (and the decoder weight, were it untied)."""
    ids = {id(p) for p in _embedding_params(model)}
    return [name for name, p in model.named_parameters() if id(p) in ids]


def body_parameter_names(model) -> list[str]:
    """Names of every other parameter: encoder, position/token-type embeddings, LayerNorms, head transform."""
    ids = {id(p) for p in _embedding_params(model)}
    return [name for name, p in model.named_parameters() if id(p) not in ids]


def freeze_body(model) -> list[str]:
    """requires_grad=False on everything except the word embeddings and the MLM head (transform + decoder
    bias); return the names of the frozen parameters. Position/token-type embeddings and the embedding
    LayerNorm are frozen too (see the module docstring for this reading of the paper's variant)."""
    trainable = {id(p) for p in _embedding_params(model)}
    frozen = []
    for name, p in model.named_parameters():
        if id(p) in trainable or name.startswith(HEAD_TRANSFORM):
            p.requires_grad_(True)
        else:
            p.requires_grad_(False)
            frozen.append(name)
    return frozen


def _is_tied(model) -> bool:
    out = model.get_output_embeddings()
    if out is None or out.weight is not model.get_input_embeddings().weight:
        return False
    bias = arch_of(model).output_bias(model)
    return out.bias is None or bias is None or out.bias is bias


def _source_params(source) -> dict[str, torch.nn.Parameter]:
    """Source parameters under BertForMaskedLM names (a bare BertModel gets the "bert." prefix)."""
    prefix = "" if hasattr(source, "bert") else "bert."
    return {prefix + name: p for name, p in source.named_parameters()}


def _shape(t: torch.Tensor) -> tuple[int, ...]:
    return tuple(t.shape)


def _check_body(target, source, src_params: dict) -> tuple[list[tuple[str, torch.Tensor, torch.Tensor]], list[str]]:
    """Pairs (name, target param, source param) to copy, and head tensors the source lacks; raise on any
    disagreement, before anything is modified."""
    tgt_params = dict(target.named_parameters())
    names = body_parameter_names(target)
    src_has_head = any(n.startswith("cls.") for n in src_params)
    t_cfg, s_cfg = target.config, source.config
    pairs, missing = [], []
    arch = arch_or_none(target)
    new = arch.own_parameters(target) if arch is not None else set()  # e.g. VECO's cross-attention: kept as built
    for name in names:
        if name in new:
            continue
        tp = tgt_params[name]
        sp = src_params.get(name)
        if sp is None:
            if name.startswith("cls.") and not src_has_head:
                missing.append(name)
                continue
            raise MetaXLMError(
                f"cannot copy the body: {name} (shape {_shape(tp)}) is not in the source model "
                f"(source: {s_cfg.num_hidden_layers} layers, hidden {s_cfg.hidden_size}; target: "
                f"{t_cfg.num_hidden_layers} layers, hidden {t_cfg.hidden_size})")
        same = sp.shape[1:] == tp.shape[1:] if name in _ROW_COPIED else sp.shape == tp.shape
        if not same:
            raise MetaXLMError(
                f"cannot copy the body: {name} has shape {_shape(tp)} in the target but {_shape(sp)} in the "
                f"source (source: hidden {s_cfg.hidden_size}, ffn {s_cfg.intermediate_size}; target: hidden "
                f"{t_cfg.hidden_size}, ffn {t_cfg.intermediate_size})")
        pairs.append((name, tp, sp))
    ignored = ("bert.pooler.", "cls.seq_relationship.", "cls.predictions.decoder.")  # not part of the body
    for name in src_params:
        if name in tgt_params or name.startswith(ignored):
            continue
        raise MetaXLMError(f"cannot copy the body: the source has {name} (shape {_shape(src_params[name])}), "
                           f"which the target lacks (source: {s_cfg.num_hidden_layers} layers, target: "
                           f"{t_cfg.num_hidden_layers})")
    if s_cfg.num_attention_heads != t_cfg.num_attention_heads:
        raise MetaXLMError(
            "cannot copy the body: bert.encoder.layer.*.attention.self (query/key/value) is split into "
            f"{t_cfg.num_attention_heads} heads in the target but {s_cfg.num_attention_heads} in the source")
    return pairs, missing


def _config_differences(target, source) -> dict:
    keys = ("hidden_act", "layer_norm_eps", "position_embedding_type", "max_position_embeddings", "type_vocab_size")
    out = {}
    for k in keys:
        a, b = getattr(source.config, k, None), getattr(target.config, k, None)
        if a != b:
            out[k] = {"source": a, "target": b}
    return out


def initialize_from_source(target, source, match: VocabMatch | None, *,
                           mode: Literal["none", "body", "emb", "both"],
                           fallback: Literal["random", "mean"] = "random", seed: int = 0) -> dict:
    """Copy the source's body and/or matched embeddings into `target` (in place); return a report.

    mode "body": the body tensors (see the module docstring); "emb": word embeddings and decoder bias
    through `match` (row t = mean of the source rows match.sources[t]; unmatched rows: fallback "random"
    keeps the target's own random init, "mean" sets them to the mean of all matched rows); "both": body
    + emb (MetaXLM); "none": nothing (XLM baseline). `source` may be a BertForMaskedLM or a bare
    BertModel (then the head transform and decoder bias stay as they are, and the report says so).
    Nothing here draws random numbers: `seed` is only recorded (random rows are the target's own init).
    """
    if mode not in MODES:
        raise MetaXLMError(f"initialization mode must be one of {list(MODES)}, got {mode!r}")
    if fallback not in FALLBACKS:
        raise MetaXLMError(f"fallback must be one of {list(FALLBACKS)}, got {fallback!r}")
    if not _is_tied(target):
        raise MetaXLMError("the target's MLM decoder must be tied to its word embeddings (tie_word_embeddings)")
    do_body, do_emb = mode in ("body", "both"), mode in ("emb", "both")
    all_names = [name for name, _ in target.named_parameters()]
    report: dict = {"mode": mode, "fallback": fallback if do_emb else None, "seed": seed, "copied": [],
                    "rows_copied": {}, "from_match": [], "missing_in_source": [], "kept": []}
    src_params = _source_params(source)

    pairs: list = []
    if do_body:
        pairs, report["missing_in_source"] = _check_body(target, source, src_params)
        report["config_differences"] = _config_differences(target, source)

    if do_emb:
        if match is None:
            raise MetaXLMError(f"mode {mode!r} needs a vocabulary match")
        w_t = target.get_input_embeddings().weight
        w_s = source.get_input_embeddings().weight
        if w_t.shape[1] != w_s.shape[1]:
            raise MetaXLMError(f"cannot copy the embeddings: {WORD_EMBEDDINGS} has hidden size {w_t.shape[1]} in "
                               f"the target but {w_s.shape[1]} in the source")
        if len(match) > w_t.shape[0]:
            raise MetaXLMError(f"the vocabulary match covers {len(match)} target ids but {WORD_EMBEDDINGS} has "
                               f"only {w_t.shape[0]} rows: match and target model use different vocabularies")
        bad = [i for ids in match.sources for i in ids if not 0 <= i < w_s.shape[0]]
        if bad:
            raise MetaXLMError(f"the vocabulary match refers to source id {bad[0]} but the source's "
                               f"{WORD_EMBEDDINGS} has {w_s.shape[0]} rows: match and source model disagree")

    with torch.no_grad():
        for name, tp, sp in pairs:
            if name in _ROW_COPIED and tp.shape[0] != sp.shape[0]:
                n = min(tp.shape[0], sp.shape[0])
                tp[:n].copy_(sp[:n])
                report["rows_copied"][name] = {"rows": n, "of": tp.shape[0]}
            else:
                tp.copy_(sp)
                report["copied"].append(name)
        if do_emb:
            report["embedding_rows"] = _init_rows(target, source, match, fallback, report)

    touched = set(report["copied"]) | set(report["rows_copied"]) | set(report["from_match"])
    report["kept"] = [n for n in all_names if n not in touched]
    if not _is_tied(target):  # in-place copies keep the tie; make sure nothing broke it
        raise MetaXLMError("internal error: initialization untied the MLM decoder from the word embeddings")
    if match is not None:
        report["match_counts"] = match.counts()
    return report


def _mean_rows(src: torch.Tensor, sources: list[list[int]], n_rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean of the source rows per target row, which rows had any), computed in float32 with index_add."""
    rows = [t for t, ids in enumerate(sources) for _ in ids]
    cols = [i for ids in sources for i in ids]
    shape = (n_rows, *src.shape[1:])
    acc = torch.zeros(shape, dtype=torch.float32)
    count = torch.zeros(n_rows, dtype=torch.float32)
    if rows:
        r = torch.tensor(rows, dtype=torch.long)
        acc.index_add_(0, r, src.detach().float()[torch.tensor(cols, dtype=torch.long)])
        count.index_add_(0, r, torch.ones(len(rows)))
    matched = count > 0
    acc[matched] /= count[matched].view(-1, *([1] * (acc.dim() - 1)))
    return acc, matched


def _init_rows(target, source, match: VocabMatch, fallback: str, report: dict) -> dict:
    w_t = target.get_input_embeddings().weight
    w_s = source.get_input_embeddings().weight
    names = dict((id(p), n) for n, p in target.named_parameters())
    mean, matched = _mean_rows(w_s, match.sources, w_t.shape[0])
    tensors = [(w_t, mean)]
    src_bias = arch_of(source).output_bias(source)  # None for a bare encoder (no MLM head)
    tgt_bias = arch_of(target).output_bias(target)
    if src_bias is not None:
        tensors.append((tgt_bias, _mean_rows(src_bias, match.sources, tgt_bias.shape[0])[0]))
    else:
        report["missing_in_source"].append(DECODER_BIAS)
    n_matched = int(matched.sum())
    for param, values in tensors:
        param[matched] = values[matched].to(param.dtype)
        if fallback == "mean" and n_matched and n_matched < param.shape[0]:
            param[~matched] = param[matched].mean(0).to(param.dtype)
        report["from_match"].append(names[id(param)])
    return {"matched": n_matched, "unmatched": int(w_t.shape[0] - n_matched),
            "fallback": fallback if n_matched else "random (nothing matched)"}
