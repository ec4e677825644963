"""The small model interface every stage uses, and the registry of model architectures (`model.arch` in a config).

Code outside a model's own file never guesses attribute names (`model.cls` or `model.lm_head`,
`base_model.encoder.layer`, ...): it asks the model's `ModelArch` for the encoder, the MLM head, the list of layers
and how to export. A new model type is one new file in `models/archs/` (a `ModelArch` subclass decorated with
`@ARCHS.register("name")`) plus `model.arch: name` in a config.
"""

from __future__ import annotations

from pathlib import Path

import torch
from pydantic import BaseModel
from torch import nn

from metaxlm.config import NoOptions, arch_options
from metaxlm.errors import ConfigError
from metaxlm.models.loading import quiet_transformers
from metaxlm.registry import ARCHS
from metaxlm.vocab.load import save_tokenizer


class ModelArch:
    """How metaxlm builds and reaches into one family of HF models (`*ForMaskedLM` classes)."""

    name = "base"
    model_types: tuple[str, ...] = ()  # HF `config.model_type` values this architecture handles

    Options: type[BaseModel] = NoOptions  # `model.options` of this architecture (validated at load_config)

    def check_options(self, cfg) -> None:
        """Validate `model.options` (a `ModelConfig`'s architecture-specific settings): a ConfigError naming the
        key. Architectures without options accept none."""
        self.options(cfg)

    def options(self, cfg) -> BaseModel:
        """`model.options` as this architecture's `Options`."""
        return arch_options(self.name, getattr(cfg, "options", None) or {})

    def adopt(self, model: nn.Module, cfg, seed: int = 0) -> nn.Module:
        """The model a `start_from` variant continues, as this architecture (`model.arch`): the loaded model itself
        by default; an architecture built from another one's weights converts it (VECO from a BERT encoder)."""
        return model

    def start_dir(self, path: Path) -> Path:
        """The directory to load when continuing the model in `path` as this architecture (`path` by default)."""
        return path

    def encoder_dir(self, checkpoint: Path) -> Path:
        """The directory the evaluations read for a training checkpoint of this architecture (intermediate
        checkpoints hold the trained weights as they are): the checkpoint itself by default."""
        return checkpoint

    def build(self, cfg, tokenizer, seed: int = 0) -> nn.Module:
        """A freshly initialized model for `tokenizer`, sized by a `ModelConfig`; the same seed gives the same
        weights, and the caller's global RNG stream is left untouched."""
        raise NotImplementedError

    def encoder(self, model: nn.Module) -> nn.Module:
        """The module mapping input_ids (+ attention_mask) to hidden states (an HF BaseModelOutput)."""
        return model.base_model

    def mlm_head(self, model: nn.Module) -> nn.Module:
        """The module mapping hidden states to vocabulary logits."""
        raise NotImplementedError

    def layers(self, model: nn.Module) -> nn.ModuleList:
        """The encoder's transformer layers, bottom to top (layer states: hidden_states[i] is after layers[:i])."""
        raise NotImplementedError

    def own_parameters(self, model: nn.Module) -> set[str]:
        """Names of the parameters a BERT-style source model has no counterpart for (VECO's cross-attention): an
        initialization from such a source keeps them as built instead of failing."""
        return set()

    def embeddings(self, model: nn.Module) -> nn.Module:
        return model.base_model.embeddings

    def output_bias(self, model: nn.Module) -> torch.Tensor | None:
        """The MLM head's per-token output bias (one row per vocabulary entry), or None if it has none."""
        return None

    def select_vocabulary(self, model: nn.Module, keep: list[int]) -> None:
        """Keep only the vocabulary rows `keep` (new id k = old id keep[k]) of the input embeddings, the output layer
        (tied or not) and its bias, in place: a model continued with a trimmed copy of its vocabulary (`vocab trim`).
        `expand_vocabulary` puts them back."""
        ids = torch.as_tensor(keep, dtype=torch.long)
        emb, out, bias = model.get_input_embeddings(), model.get_output_embeddings(), self.output_bias(model)
        if int(ids.min()) < 0 or int(ids.max()) >= emb.num_embeddings:
            raise ConfigError(f"vocabulary selection has ids outside the model's {emb.num_embeddings:,} rows")
        old_pad = emb.padding_idx
        new_pad = next((k for k, old in enumerate(keep) if old == old_pad), None) if old_pad is not None else None
        self._set_vocabulary(model, emb.weight.detach()[ids], new_pad,
                             output=None if _tied(model) else out.weight.detach()[ids],
                             bias=None if bias is None else bias.detach()[ids])

    def expand_vocabulary(self, model: nn.Module, start: nn.Module, new_to_old: list[int]) -> None:
        """The counterpart of `select_vocabulary`, in place: `model`, whose vocabulary rows stand for rows `new_to_old`
        of `start`'s, gets `start`'s whole vocabulary — row new_to_old[k] is the model's row k, every other row
        `start`'s own — in the input embeddings, the output layer (tied or not) and its bias. `start` may be of
        another architecture (a VECO model continuing a BERT start)."""
        ids = torch.as_tensor(new_to_old, dtype=torch.long)
        emb, full = model.get_input_embeddings(), start.get_input_embeddings()
        if len(ids) != emb.num_embeddings or int(ids.min()) < 0 or int(ids.max()) >= full.num_embeddings or \
                emb.embedding_dim != full.embedding_dim:
            raise ConfigError(f"cannot put {emb.num_embeddings:,} vocabulary rows of width {emb.embedding_dim} at "
                              f"{len(ids):,} ids among {full.num_embeddings:,} rows of width {full.embedding_dim}")

        def scattered(rows: torch.Tensor | None, start_rows: torch.Tensor | None, what: str) -> torch.Tensor | None:
            if rows is None:
                return None
            if start_rows is None:
                raise ConfigError(f"the start model has no {what} to take the rows of the other pieces from")
            whole = start_rows.detach().to(rows.dtype).clone()
            whole[ids] = rows.detach()
            return whole

        bias, start_bias = self.output_bias(model), arch_of(start).output_bias(start)
        output = None if _tied(model) else model.get_output_embeddings().weight
        start_output = None if _tied(start) else start.get_output_embeddings().weight
        self._set_vocabulary(model, scattered(emb.weight, full.weight, "input embeddings"), full.padding_idx,
                             output=scattered(output, start_output, "untied output layer"),
                             bias=scattered(bias, start_bias, "MLM output bias"))

    def _set_vocabulary(self, model: nn.Module, embeddings: torch.Tensor, padding_idx: int | None, *,
                        output: torch.Tensor | None, bias: torch.Tensor | None) -> None:
        """Give `model` these word embeddings (one row per vocabulary entry), untied output weights and output bias
        (None: tied to the embeddings / no bias)."""
        new = nn.Embedding(*embeddings.shape, padding_idx=padding_idx, dtype=embeddings.dtype)
        with torch.no_grad():
            new.weight.copy_(embeddings)
        model.set_input_embeddings(new)
        if bias is not None:  # data replaced in place: the parameter stays the one the decoder adds
            self.output_bias(model).data = bias.clone()
        out = model.get_output_embeddings()
        if output is not None:
            out.weight = nn.Parameter(output.clone())
        model.config.vocab_size = len(embeddings)
        if out is not None:
            out.out_features = len(embeddings)
        model.tie_weights()

    def truncated_encoder(self, model: nn.Module, n_layers: int) -> nn.Module:
        """The encoder computing only its first `n_layers` layers, weights shared (the model is not changed);
        the whole encoder where the architecture cannot be cut."""
        return self.encoder(model)

    def export(self, model: nn.Module, tokenizer, out_dir: str | Path, state_dict: dict | None = None) -> None:
        """Write an HF checkpoint directory (safetensors + config.json + tokenizer) that loads with
        `AutoModelForMaskedLM.from_pretrained`. `state_dict`: gathered full weights of a sharded model."""
        with quiet_transformers():  # no "Writing model shards" bar in the run's output (nor with --no-progress)
            model.save_pretrained(str(out_dir), state_dict=state_dict)
        if tokenizer is not None:
            save_tokenizer(tokenizer, out_dir)


ARCHS.require(ModelArch)


def get_arch(name: str) -> ModelArch:
    return ARCHS.get(name, where="model.arch")()


def arch_of(model: nn.Module) -> ModelArch:
    """The architecture that handles a (loaded or built) HF model, by its config's model_type."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    for name in ARCHS.names():
        arch = ARCHS.get(name)
        if model_type in arch.model_types:
            return arch()
    known = "; ".join(f"{n}: {', '.join(ARCHS.get(n).model_types)}" for n in ARCHS.names())
    raise ConfigError(f"model type {model_type!r} has no metaxlm architecture (registered: {known})")


def arch_or_none(model: nn.Module) -> ModelArch | None:
    """`arch_of(model)`, or None for a model type no architecture handles (probes then run it whole)."""
    try:
        return arch_of(model)
    except ConfigError:
        return None


def _tied(model: nn.Module) -> bool:
    """Whether the model has no output layer of its own: none at all, or one tied to the input embeddings."""
    out = model.get_output_embeddings()
    return out is None or out.weight is model.get_input_embeddings().weight


def build_mlm(cfg, tokenizer, seed: int = 0) -> nn.Module:
    """A freshly initialized masked-LM model of architecture `cfg.arch` (a `ModelConfig`) for `tokenizer`."""
    arch = get_arch(cfg.arch)
    arch.check_options(cfg)
    with torch.random.fork_rng(devices=[]):  # seeding must not disturb the caller's RNG stream
        torch.manual_seed(seed)
        return arch.build(cfg, tokenizer)
