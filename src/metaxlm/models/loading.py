"""Helpers for loading HF models, shared by the feature probes, fine-tuning and pretraining.

Model directories come from users, so they are checked before transformers reads them, each problem a DataError
naming the file: weights only as safetensors (unpickling a checkpoint can run arbitrary code), a config.json that is
a JSON object with a known model_type and sizes ≥ 1, and (once loaded) a tokenizer that fits the embedding matrix.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path

from metaxlm.errors import DataError

__all__ = ["check_model_dir", "check_vocabulary_fits", "fresh_parameters", "load_model_config", "load_pretrained",
           "quiet_transformers"]

SAFETENSORS_WEIGHTS = ("model.safetensors", "model.safetensors.index.json")  # single file, or sharded
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
# The sizes a model's weights are shaped by: a negative one fails deep inside torch ("negative dimension"), a zero
# number of heads divides by zero, zero layers silently builds an empty encoder.
POSITIVE_SIZES = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                  "max_position_embeddings")
RESAVE_HINT = "load it where you trust its source and save it again with save_pretrained"


@contextmanager
def quiet_transformers():
    """Silence transformers' load report and progress bar while loading. A pretraining checkpoint has an MLM
    head and no task head: the report of unexpected/missing weights is then expected, and callers check the
    weights that matter themselves."""
    from transformers.utils import logging as hf_logging

    verbosity, bar = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bar:
            hf_logging.enable_progress_bar()


def check_model_dir(model_dir: str | Path) -> Path:
    """`model_dir` if it is a model directory metaxlm may load: a config.json it can read, and safetensors weights
    (a pickle checkpoint — pytorch_model.bin, *.pt, *.ckpt — is refused, never unpickled). Raises DataError."""
    model_dir = Path(model_dir)
    if not model_dir.is_dir():  # checked here: transformers would take a missing path for a Hub model name
        raise DataError(model_dir, None, "no such model directory")
    config_file = model_dir / "config.json"
    settings = _read_config(config_file)
    _check_settings(config_file, settings)
    named = settings.get("transformers_weights")  # transformers loads the file a config names, whatever its format
    if named is not None and not str(named).endswith((".safetensors", ".safetensors.index.json")):
        raise DataError(config_file, None, f"transformers_weights names {named!r}, not a safetensors file: metaxlm "
                                           f"loads weights only from safetensors (unpickling can run code); remove "
                                           f"the key, or {RESAVE_HINT}")
    if named is None and not any((model_dir / name).is_file() for name in SAFETENSORS_WEIGHTS):
        pickles = sorted(p.name for p in model_dir.iterdir()
                         if p.suffix in PICKLE_SUFFIXES or p.name.endswith(".bin.index.json"))
        if pickles:
            raise DataError(model_dir / pickles[0], None,
                            f"a pickle checkpoint ({', '.join(pickles)}) and no model.safetensors: metaxlm loads "
                            f"weights only from safetensors, since unpickling a file can run arbitrary code; to "
                            f"convert it, {RESAVE_HINT} (it writes model.safetensors)")
        raise DataError(model_dir, None, "no model.safetensors (nor a sharded model.safetensors.index.json): not a "
                                         "model saved with save_pretrained")
    return model_dir


def load_model_config(model_dir: str | Path):
    """The AutoConfig of a model directory that passed `check_model_dir`; a config transformers rejects (e.g. a
    size of the wrong type) is a DataError naming config.json."""
    from huggingface_hub.errors import StrictDataclassError
    from transformers import AutoConfig

    model_dir = check_model_dir(model_dir)
    try:
        return AutoConfig.from_pretrained(str(model_dir))
    except (OSError, ValueError, TypeError, StrictDataclassError) as err:
        raise DataError(model_dir / "config.json", None, f"transformers cannot read it: {err}") from None


def load_pretrained(model_class, model_dir: str | Path, **kwargs):
    """`model_class.from_pretrained(model_dir, **kwargs)` after `load_model_config`'s checks, from safetensors only:
    use_safetensors=True makes transformers itself refuse a pickle checkpoint too."""
    load_model_config(model_dir)
    return model_class.from_pretrained(str(model_dir), use_safetensors=True, **kwargs)


def fresh_parameters(model, lacked: set[str]) -> set[str]:
    """The parameters of `model` (names as in `named_parameters()`) that a checkpoint lacked: those lacked under every
    name they have. A tied parameter loaded under one of its names is not fresh: a new MLM head's decoder weight IS
    the loaded word-embedding matrix, while its bias (tied to the head's own bias, both names lacked) is fresh."""
    names: dict[int, set[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), set()).add(name)
    return {name for name, p in model.named_parameters() if names[id(p)] <= lacked}


def check_vocabulary_fits(model, tokenizer, model_dir: str | Path, tokenizer_dir: str | Path | None = None) -> None:
    """Refuse a tokenizer with more pieces than the model has embedding rows: its ids past the last row would fail
    deep inside the first forward pass (an index error on CPU, a device-side assert on GPU). Fewer pieces than rows
    is fine (some models pad their embedding matrix). An encoder-decoder's decoder embeddings are checked too."""
    tables = [model.get_input_embeddings()]
    if getattr(model.config, "is_encoder_decoder", False) and hasattr(model, "get_decoder"):
        tables.append(model.get_decoder().get_input_embeddings())
    rows = min(table.num_embeddings for table in tables if table is not None)
    if len(tokenizer) > rows:
        source = f" ({tokenizer_dir})" if tokenizer_dir else ""
        raise DataError(model_dir, None, f"the tokenizer{source} has {len(tokenizer):,} pieces but the model's "
                                         f"embedding matrix has {rows:,} rows: the ids from {rows:,} on have no "
                                         f"embedding; use the tokenizer the model was trained with (for metaxlm "
                                         f"runs: <run>/vocab)")


def _read_config(config_file: Path) -> dict:
    if not config_file.is_file():
        raise DataError(config_file, None, "missing: not an HF model directory (save_pretrained writes config.json)")
    try:
        settings = json.loads(config_file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise DataError(config_file, err.lineno, f"not valid JSON ({err.msg}, column {err.colno})") from None
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(config_file, None, f"unreadable ({err})") from None
    if not isinstance(settings, dict):
        raise DataError(config_file, None, f"expected a JSON object of model settings, got a {type(settings).__name__}")
    return settings


def _check_settings(config_file: Path, settings: dict, prefix: str = "") -> None:
    """A known model_type and sizes ≥ 1, in the config and in its sub-configs (an encoder-decoder's encoder and
    decoder: the dict values that have a model_type of their own)."""
    from transformers import CONFIG_MAPPING

    model_type = settings.get("model_type")
    if model_type is None:
        raise DataError(config_file, None, f"no {prefix}model_type: it names the architecture to build; add it, "
                                           f"e.g. \"model_type\": \"bert\"")
    if not isinstance(model_type, str) or model_type not in CONFIG_MAPPING:
        raise DataError(config_file, None, f"{prefix}model_type {model_type!r} is not an architecture transformers "
                                           f"(or metaxlm) knows, e.g. 'bert', 'xlm-roberta', 'encoder-decoder'")
    for key, value in settings.items():
        if key in POSITIVE_SIZES and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise DataError(config_file, None, f"{prefix}{key} is {value!r}: it must be a whole number ≥ 1 (it "
                                               f"shapes the model's weights)")
        if key.endswith("_size") or key.startswith("num_"):
            if isinstance(value, int) and not isinstance(value, bool) and value < 0:
                raise DataError(config_file, None, f"{prefix}{key} is {value}: a size or count cannot be negative")
        if isinstance(value, dict) and "model_type" in value:
            _check_settings(config_file, value, f"{prefix}{key}.")
