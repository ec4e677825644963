"""Loading an encoder for fine-tuning: a metaxlm pretraining checkpoint (BertForMaskedLM saved with
save_pretrained; its tokenizer lives in the run's `vocab/` dir) or any HF AutoModel directory; for translation,
any HF sequence-to-sequence directory (`load_seq2seq`)."""

from __future__ import annotations

from pathlib import Path

from metaxlm.errors import MetaXLMError
from metaxlm.models.archs.veco import VECO_SUBDIR
from metaxlm.models.loading import (
    check_vocabulary_fits,
    load_model_config,
    load_pretrained,
    quiet_transformers,
)
from metaxlm.models.new_parameters import mark_new
from metaxlm.vocab import load_tokenizer


def seq2seq_hint(model_dir: Path, model_type: str) -> str:
    """What makes a translating model of the encoder in `model_dir`: `veco export --nlg` takes only a VECO model
    (a VECO run's final/ keeps it in veco/); any encoder gets its encoder-decoder from fine-tuning a translation task
    with a seq2seq assembly (TaskSpec.seq2seq: the encoder's weights in both halves, cross-attention new), which
    also trains it to translate."""
    finetune = (f"`metaxlm finetune translation_demo seq2seq.init={{init}} --model {model_dir} --out OUT "
                f"--save-models` (then `metaxlm translate --model OUT/models/de-seed0`)")
    if model_type == "veco" or (model_dir / VECO_SUBDIR / "config.json").exists():
        return (f"a VECO model: export it as an encoder-decoder with `metaxlm veco export --model {model_dir} --nlg "
                f"--out OUT`, or fine-tune it on translation: {finetune.format(init='veco')}")
    return (f"an encoder ({model_type}): fine-tune it on a translation task, which assembles the encoder-decoder from "
            f"it: {finetune.format(init='encoder')}")


def load_finetune_tokenizer(model_dir: str | Path, tokenizer_dir: str | Path | None = None):
    """The tokenizer in `tokenizer_dir`, else the one saved beside the model; it must be a fast tokenizer
    (offset mappings and word ids drive the span, tagging and QA features)."""
    source = Path(tokenizer_dir) if tokenizer_dir else Path(model_dir)
    if tokenizer_dir is None and not (source / "tokenizer_config.json").exists():
        raise MetaXLMError(f"{model_dir}: no tokenizer saved beside the model; pass the tokenizer directory "
                           "(for metaxlm runs: <run>/vocab)")
    tokenizer = load_tokenizer(source)
    if not getattr(tokenizer, "is_fast", False):
        raise MetaXLMError(f"{source}: fine-tuning needs a fast (tokenizers-backed) tokenizer for offset mappings")
    return tokenizer


def load_seq2seq(model_dir: str | Path):
    """The model in `model_dir` as AutoModelForSeq2SeqLM, in eval mode; a clear error when it is not one."""
    from transformers import AutoModelForSeq2SeqLM

    model_dir = Path(model_dir)
    with quiet_transformers():
        config = load_model_config(model_dir)
        if not getattr(config, "is_encoder_decoder", False):
            raise MetaXLMError(f"{model_dir}: not a sequence-to-sequence model (no decoder), so it cannot translate; "
                               f"it is {seq2seq_hint(model_dir, config.model_type)}")
        try:
            model = load_pretrained(AutoModelForSeq2SeqLM, model_dir)
        except (OSError, ValueError) as err:
            raise MetaXLMError(f"{model_dir}: cannot load as AutoModelForSeq2SeqLM: {err}") from None
    missing = [key for key in ("decoder_start_token_id", "eos_token_id", "pad_token_id")
               if special_token(model, key) is None]
    if missing:
        raise MetaXLMError(f"{model_dir}: the config sets no {', '.join(missing)} (generate() needs them); set "
                           f"them in its config.json (`metaxlm veco export --nlg` and fine-tuning a translation task "
                           f"with `seq2seq` set them)")
    return model.eval()


def special_token(model, key: str) -> int | None:
    """A special token id from the generation config, else the model config."""
    value = getattr(model.generation_config, key, None)
    if value is None:
        value = getattr(model.config, key, None)
    return value[0] if isinstance(value, list) else value


def load_model(task, model_dir: str | Path, train_items=None):
    """The task's head (`task.auto_model`) on the encoder in `model_dir`, head newly initialized (call
    `trainer.set_seed` first for a reproducible head). Raises if encoder weights are missing, which means the
    directory holds a different architecture (only the pooler and the head may be new). `train_items`: the
    training examples, for a translation model whose vocabulary is trimmed to them (`seq2seq.vocabulary: train`:
    the task's tokenizer is replaced by the trimmed one)."""
    import transformers

    if task.auto_model == "AutoModelForSeq2SeqLM":  # an encoder-decoder as it is, or assembled (spec.seq2seq)
        assembly = getattr(getattr(task, "spec", None), "seq2seq", None)
        if assembly is None:
            model = load_seq2seq(model_dir)
        else:
            import torch

            from metaxlm.models.seq2seq import tie_encoder_decoder_embeddings
            from metaxlm.models.veco_export import assemble_seq2seq

            rows = None
            if assembly.vocabulary == "train":
                from metaxlm.vocab.trim import trimmed_tokenizer

                if not train_items:
                    raise MetaXLMError("seq2seq.vocabulary: train needs the training pairs")
                texts = [text for ex in train_items for text in (ex.source, ex.target)]
                task.tokenizer, rows = trimmed_tokenizer(task.tokenizer, texts)
            # new weights under the fine-tuning seed (set_seed ran just before): part of the run, like a new head
            model = assemble_seq2seq(model_dir, tokenizer=task.tokenizer, decoder_layers=assembly.decoder_layers,
                                     init=assembly.init, seed=torch.initial_seed(), vocabulary_rows=rows)
            if assembly.share_embeddings:
                tie_encoder_decoder_embeddings(model)
            if assembly.fast_cross_attention:
                mark_new(model, {name for name, _ in model.named_parameters() if ".crossattention." in name})
        check_vocabulary_fits(model, task.tokenizer, model_dir, getattr(task.tokenizer, "name_or_path", None))
        task.decoder_start_token_id = special_token(model, "decoder_start_token_id")
        return model
    auto = getattr(transformers, task.auto_model)
    with quiet_transformers():
        try:
            # a directory that already holds a head of another size gets a new head (mismatched body
            # weights are rejected below)
            model, info = load_pretrained(auto, model_dir, output_loading_info=True, ignore_mismatched_sizes=True,
                                          **task.model_kwargs())
        except (OSError, ValueError) as err:
            raise MetaXLMError(f"{model_dir}: cannot load as {task.auto_model}: {err}") from None
    check_vocabulary_fits(model, task.tokenizer, model_dir, getattr(task.tokenizer, "name_or_path", None))
    body = model.base_model_prefix
    mismatched = {k[0] if isinstance(k, tuple) else k for k in info.get("mismatched_keys", ())}
    missing = sorted(k for k in set(info["missing_keys"]) | mismatched
                     if k.startswith(f"{body}.") and ".pooler." not in k)
    # the weights this model starts without: the trainer gives them hyperparameters.head_lr_scale
    mark_new(model, {k[0] if isinstance(k, tuple) else k
                     for k in [*info["missing_keys"], *info.get("mismatched_keys", ())]})
    if missing:
        raise MetaXLMError(f"{model_dir}: encoder weights missing from the checkpoint or of another shape "
                           f"({', '.join(missing[:5])}"
                           f"{', ...' if len(missing) > 5 else ''}): not an encoder of this architecture")
    return model
