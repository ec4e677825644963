"""Hidden states of every requested layer from ONE forward pass, and pooled sentence vectors per layer.

The encoder runs once per batch and stops at the highest requested layer: it runs a shallow copy of the base
model whose encoder keeps only the first layers (weights shared, the model itself is not changed; no pooler, no
LM head; the model's architecture in metaxlm.models.arch knows how to cut it), and forward hooks on the layers
collect their outputs. A model type no architecture handles runs whole with `output_hidden_states`.
Batches hold texts of similar length (sorted), so little compute goes to padding; inference runs in the
precision that fits the machine (`precision="auto"`: bf16 autocast only where bf16 matmuls are faster, see
metaxlm.compute.precision), or as asked (`bf16`, `fp32`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path

import torch
from torch import nn
from tqdm import tqdm

from metaxlm.compute.devices import compute_device
from metaxlm.compute.precision import precision_for
from metaxlm.config import INFERENCE_BATCH_TOKENS, PROBE_PRECISIONS
from metaxlm.data.padding import length_sorted_batches, pad_right
from metaxlm.errors import ConfigError
from metaxlm.models.arch import arch_or_none
from metaxlm.models.pooling import cls_pool, mean_pool

POOLINGS = ("mean", "cls")


def num_layers(model) -> int:
    return int(model.config.num_hidden_layers)


def resolve_layers(model, layers: Sequence[int] | None) -> list[int]:
    """Sorted distinct layer numbers (0 = embeddings); None = every layer."""
    top = num_layers(model)
    if layers is None:
        return list(range(top + 1))
    bad = [layer for layer in layers if not 0 <= int(layer) <= top]
    if bad or not layers:
        raise ConfigError(f"layers must be a non-empty list within 0..{top} (0 = embeddings), got {list(layers)}")
    return sorted({int(layer) for layer in layers})


def max_positions(model, tokenizer, max_length: int = 512) -> int:
    """Longest input (special tokens included) the model can take: its position table, the tokenizer's limit
    and `max_length`. RoBERTa-style embeddings number positions from padding_idx + 1, which costs that many."""
    limit = int(getattr(model.config, "max_position_embeddings", max_length) or max_length)
    padding_idx = getattr(getattr(model.base_model, "embeddings", None), "padding_idx", None)
    if padding_idx is not None:
        limit -= int(padding_idx) + 1
    tokenizer_limit = getattr(tokenizer, "model_max_length", None) or limit
    return min(limit, max_length, tokenizer_limit if tokenizer_limit < 1_000_000 else limit)


def layer_blocks(model) -> nn.ModuleList | None:
    """The encoder's transformer layers, from the model's architecture (metaxlm.models.arch); None for a
    model type no architecture handles."""
    arch = arch_or_none(model)
    return None if arch is None else arch.layers(model)


def truncated_encoder(model, n_layers: int) -> nn.Module:
    """The encoder computing only its first `n_layers` layers (the whole base model if it cannot be cut)."""
    arch = arch_or_none(model)
    return model.base_model if arch is None else arch.truncated_encoder(model, n_layers)


def inference_precision(model, precision: str = "auto") -> str:
    """The concrete precision ("bf16", "fp32" or "native") for `precision`; "auto" is the process's one decision
    (metaxlm.compute.precision) on the model's device."""
    if precision not in PROBE_PRECISIONS:
        raise ConfigError(f"precision must be one of {', '.join(PROBE_PRECISIONS)}; got {precision!r}")
    if precision == "native":
        return precision
    return precision_for(model, precision).precision


@contextmanager
def inference(model, precision: str = "auto"):
    """Eval mode (restored afterwards), no autograd, autocast to `inference_precision` on the model's device."""
    precision = inference_precision(model, precision)
    was_training = model.training
    model.eval()
    device_type = next(model.parameters()).device.type
    autocast = torch.autocast(device_type, dtype=torch.bfloat16) if precision == "bf16" else nullcontext()
    try:
        with torch.inference_mode(), autocast:
            yield
    finally:
        model.train(was_training)


class LayerRunner:
    """Call with a padded batch; returns {layer: (batch, seq, hidden) float32} from one forward pass.

    The states are taken by forward hooks on the layers (hidden state 0 = the input of layer 1, as in HF's
    `hidden_states`), removed after each call. Models without a layer list use `output_hidden_states`."""

    def __init__(self, model, layers: Sequence[int]):
        self.layers = list(layers)
        self.top = max(self.layers)
        self.blocks = layer_blocks(model)
        self.encoder = truncated_encoder(model, self.top)
        self.device = next(model.parameters()).device

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> dict[int, torch.Tensor]:
        inputs = {"input_ids": input_ids.to(self.device), "attention_mask": attention_mask.to(self.device)}
        if self.blocks is None:
            states = self.encoder(**inputs, output_hidden_states=True, return_dict=True).hidden_states
            return {layer: states[layer].float() for layer in self.layers}
        states: dict[int, torch.Tensor] = {}

        def keep_input(module, args, kwargs):
            states[0] = args[0] if args else kwargs["hidden_states"]

        def keep_output(index):
            def hook(module, args, output):
                states[index] = output[0] if isinstance(output, tuple) else output
            return hook

        handles = [self.blocks[0].register_forward_pre_hook(keep_input, with_kwargs=True)] if self.top else []
        handles += [self.blocks[k].register_forward_hook(keep_output(k + 1)) for k in range(self.top)]
        try:
            out = self.encoder(**inputs, output_hidden_states=False, return_dict=True)
        finally:
            for handle in handles:
                handle.remove()
        if self.top == 0:
            states[0] = out.last_hidden_state
        return {layer: states[layer].float() for layer in self.layers}


def pad_batch(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask) of right-padded rows."""
    return pad_right(rows, pad_id)


def pad_id(tokenizer) -> int:
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0


def tokenize_texts(tokenizer, texts: Sequence[str], limit: int) -> list[list[int]]:
    """Token ids with special tokens; texts longer than `limit` tokens are truncated, with one warning."""
    ids = tokenizer(list(texts), add_special_tokens=True)["input_ids"]
    too_long = [k for k, row in enumerate(ids) if len(row) > limit]
    if too_long:
        warnings.warn(f"{len(too_long)} of {len(ids)} texts are longer than {limit} tokens (the model's limit) "
                      f"and were truncated", stacklevel=3)
        cut = tokenizer([texts[k] for k in too_long], add_special_tokens=True, truncation=True, max_length=limit)
        for k, row in zip(too_long, cut["input_ids"], strict=True):
            ids[k] = row
    return ids


def pool(states: torch.Tensor, attention_mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """Sentence vectors from (batch, seq, hidden): mask-aware mean over all real tokens (special tokens
    included, as in the Tatoeba protocol of XTREME), or the first token."""
    return cls_pool(states) if pooling == "cls" else mean_pool(states, attention_mask)


def encode_layers(model, tokenizer, texts: Sequence[str], *, layers: Sequence[int] | None = None,
                  batch_size: int = 64, batch_tokens: int | None = INFERENCE_BATCH_TOKENS, pooling: str = "mean",
                  max_length: int = 512, precision: str = "auto", progress: bool = False) -> dict[int, torch.Tensor]:
    """Pooled sentence vectors {layer: (len(texts), hidden) float32} for every requested layer (0 = embeddings,
    default: all), from one forward pass per batch (at most `batch_size` texts and `batch_tokens` padded tokens)."""
    if pooling not in POOLINGS:
        raise ConfigError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    layers = resolve_layers(model, layers)
    ids = tokenize_texts(tokenizer, texts, max_positions(model, tokenizer, max_length))
    out = {layer: torch.zeros(len(texts), model.config.hidden_size) for layer in layers}
    runner = LayerRunner(model, layers)
    with inference(model, precision):
        for batch in tqdm(length_sorted_batches([len(row) for row in ids], batch_size, batch_tokens), desc="encode",
                          unit="batch", disable=not progress):
            input_ids, attention_mask = pad_batch([ids[k] for k in batch], pad_id(tokenizer))
            for layer, states in runner(input_ids, attention_mask).items():
                out[layer][batch] = pool(states, attention_mask, pooling).cpu()
    return out


def load_encoder(model_dir: str | Path, tokenizer_dir: str | Path | None = None):
    """(encoder in eval mode on the device every loop runs on, tokenizer) from HF dirs. A pretraining checkpoint's
    MLM head is dropped on purpose, so transformers' load report about it is silenced; a missing or unloadable dir
    is a clear error."""
    from transformers import AutoModel, AutoTokenizer

    from metaxlm.errors import MetaXLMError
    from metaxlm.models.loading import check_vocabulary_fits, load_pretrained, quiet_transformers

    for what, path in (("model", model_dir), ("tokenizer", tokenizer_dir or model_dir)):
        if not Path(path).is_dir():
            raise MetaXLMError(f"{path}: no such {what} directory")
    try:
        with quiet_transformers():  # first: a tokenizer beside the model reads its config.json too, unchecked
            model = load_pretrained(AutoModel, model_dir)
        tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir or model_dir))
    except (OSError, ValueError) as e:
        raise MetaXLMError(f"{model_dir}: cannot load an encoder and its tokenizer: {e}") from None
    check_vocabulary_fits(model, tokenizer, model_dir, tokenizer_dir or model_dir)
    return model.to(compute_device()).eval(), tokenizer
