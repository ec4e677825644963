"""Translation: reading sentence pairs (and bad input named by file and line), the label-smoothed teacher-forced
loss, batched beam search against one-sentence generate(), `metaxlm translate`, sacreBLEU scores, the task end to
end (a tiny model overfits; scores after chosen steps), on a tiny EncoderDecoderModel built here."""

import lzma
import math
import os
from pathlib import Path

import pytest
import sacrebleu
import torch
import transformers
from conftest import REPO
from pydantic import ValidationError

from metaxlm.cli import main
from metaxlm.data.benchmarks import load_examples
from metaxlm.data.examples import TranslationExample
from metaxlm.errors import DataError, MetaXLMError
from metaxlm.finetune.models import load_model, load_seq2seq
from metaxlm.finetune.resume_key import run_fingerprint
from metaxlm.finetune.runner import run_task
from metaxlm.finetune.spec import Hyperparameters, TaskSpec, load_task_spec
from metaxlm.finetune.tasks import get_task
from metaxlm.finetune.trainer import finetune, predict, set_seed
from metaxlm.finetune.translate import corpus_scores, generate_translations
from metaxlm.models.new_parameters import new_parameter_names

PAIRS = [("the house is small", "das Haus ist klein"),
         ("the cat sleeps", "die Katze schläft"),
         ("the red chair", "dem roten Stuhl"),
         ("an open window", "am offenen Fenster"),
         ("the cat sleeps on the red chair", "die Katze schläft auf dem roten Stuhl"),
         ("the house", "das Haus")]


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def tiny_seq2seq(tokenizer, out, seed: int = 0, hidden: int = 32):
    """A tiny BERT2BERT EncoderDecoderModel saved with the tokenizer, as `metaxlm veco export --nlg` lays it out."""
    def config(decoder: bool):
        return transformers.BertConfig(vocab_size=len(tokenizer), hidden_size=hidden, num_hidden_layers=2,
                                       num_attention_heads=2, intermediate_size=2 * hidden, max_position_embeddings=64,
                                       pad_token_id=tokenizer.pad_token_id, is_decoder=decoder,
                                       add_cross_attention=decoder)
    cfg = transformers.EncoderDecoderConfig.from_encoder_decoder_configs(config(False), config(True))
    cfg.decoder_start_token_id = tokenizer.cls_token_id
    cfg.eos_token_id = tokenizer.sep_token_id
    cfg.pad_token_id = tokenizer.pad_token_id
    transformers.set_seed(seed)
    transformers.EncoderDecoderModel(config=cfg).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def model_dir(tokenizer, tmp_path_factory):
    return tiny_seq2seq(tokenizer, tmp_path_factory.mktemp("tiny_seq2seq"))


def hp(**kw) -> Hyperparameters:
    return Hyperparameters(**{"lr": 3e-3, "batch_size": 4, "max_steps": 10, "max_seq_len": 32, "warmup_ratio": 0.0,
                              "num_beams": 2, "max_new_tokens": 12, "eval_batch_size": 4, **kw})


def write_xz(path, text: str):
    with lzma.open(path, "wt", encoding="utf-8") as f:
        f.write(text)
    return path


def spec(tmp_path, **kw) -> TaskSpec:
    """The toy task over PAIRS, one en-<lang>.tsv per target language (default: de)."""
    languages = kw.pop("languages", ["en", "de"])
    for lang in languages[1:]:
        (tmp_path / f"en-{lang}.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in PAIRS), encoding="utf-8")
    return TaskSpec(**{"name": "toy_mt", "type": "translation", "format": "parallel_tsv", "metric": "bleu",
                       "languages": languages, "source": "en", "train": str(tmp_path / "en-{lang}.tsv"),
                       "test": str(tmp_path / "en-{lang}.tsv"), "seeds": [0],
                       "hyperparameters": hp(max_steps=4).model_dump(), **kw})


# -- reading --------------------------------------------------------------------------------------------------------

def test_reads_a_tsv_both_ways_and_file_pairs(tmp_path):
    tsv = write_xz(tmp_path / "en-de.tsv.xz", "".join(f"{a}\t{b}\n" for a, b in PAIRS))
    forward = load_examples("parallel_tsv", tsv)
    assert [(ex.source, ex.target) for ex in forward] == PAIRS
    reverse = load_examples("parallel_tsv", tsv, direction="reverse")
    assert [(ex.target, ex.source) for ex in reverse] == PAIRS
    write_xz(tmp_path / "test.en-de.en.xz", "".join(a + "\n" for a, _ in PAIRS))
    write_xz(tmp_path / "test.en-de.de.xz", "".join(b + "\n" for _, b in PAIRS))
    # `{side}` takes each side's language code
    files = load_examples("parallel_files", tmp_path / "test.en-de.{side}.xz", lang="de", source="en")
    assert [(ex.source, ex.target) for ex in files] == PAIRS
    assert isinstance(files[0], TranslationExample)
    reverse = load_examples("parallel_files", tmp_path / "test.en-de.{side}.xz", lang="de", direction="reverse")
    assert [(ex.target, ex.source) for ex in reverse] == PAIRS


def test_spec_path_keeps_side_for_the_loader(tmp_path):
    s = spec(tmp_path, format="parallel_files", test=str(tmp_path / "test.en-{lang}.{side}"))
    assert str(s.path("test", "de")).endswith("test.en-de.{side}")
    with pytest.raises(ValidationError, match="does not fit type translation"):
        spec(tmp_path, format="xnli")


@pytest.mark.parametrize(("content", "line", "problem"), [
    ("a b\tc d\nno target here\n", 2, "got 1 columns"),
    ("a b\tc d\nsource only\t\n", 2, "a column is empty"),
    ("a b\tc d\n\tonly a target\n", 2, "a column is empty"),
    ("a b\tc d\nx\ty\tz\n", 2, "got 3 columns"),
])
def test_bad_tsv_lines_are_named(tmp_path, content, line, problem):
    path = tmp_path / "pairs.tsv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=problem) as err:
        load_examples("parallel_tsv", path)
    assert (err.value.path, err.value.line) == (str(path), line)
    assert str(err.value).startswith(f"{path}:{line}: ")


def test_undecodable_bytes_are_named(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_bytes(b"a b\tc d\ne f\tg \xff h\n")
    with pytest.raises(DataError, match="invalid UTF-8") as err:
        load_examples("parallel_tsv", path)
    assert (err.value.path, err.value.line) == (str(path), 2)
    (tmp_path / "x.en").write_bytes(b"one\ntwo\nthree\n")
    (tmp_path / "x.de").write_bytes(b"eins\nzwei\n\xc3(drei\n")
    with pytest.raises(DataError, match="invalid UTF-8") as err:
        load_examples("parallel_files", tmp_path / "x.{side}", lang="de", source="en")
    assert (err.value.path, err.value.line) == (str(tmp_path / "x.de"), 3)


def test_mismatched_file_pairs_are_named(tmp_path):
    (tmp_path / "x.en").write_text("one\ntwo\nthree\n", encoding="utf-8")
    (tmp_path / "x.de").write_text("eins\nzwei\n", encoding="utf-8")
    with pytest.raises(DataError, match="file ends here") as err:
        load_examples("parallel_files", tmp_path / "x.{side}", lang="de", source="en")
    assert (err.value.path, err.value.line) == (str(tmp_path / "x.de"), 2)
    (tmp_path / "x.de").write_text("eins\n\ndrei\n", encoding="utf-8")
    with pytest.raises(DataError, match="empty line") as err:
        load_examples("parallel_files", tmp_path / "x.{side}", lang="de", source="en")
    assert (err.value.path, err.value.line) == (str(tmp_path / "x.de"), 2)


def test_bad_input_through_the_cli_is_one_line_naming_file_and_line(tmp_path, model_dir, capsys):
    (tmp_path / "en-de.tsv").write_text("a b\tc d\nno target\n", encoding="utf-8")
    task = tmp_path / "mt.yaml"
    task.write_text(f"type: translation\nformat: parallel_tsv\nmetric: bleu\nlanguages: [en, de]\n"
                    f"train: {tmp_path}/en-{{lang}}.tsv\ntest: {tmp_path}/en-{{lang}}.tsv\n", encoding="utf-8")
    assert main(["finetune", str(task), "--model", str(model_dir), "--out", str(tmp_path / "out"),
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'en-de.tsv'}:2: expected 2 non-empty tab-separated columns" in err
    assert "Traceback" not in err


# -- the loss -------------------------------------------------------------------------------------------------------

def batch_for(task, pairs):
    examples = [TranslationExample(str(i), a, b) for i, (a, b) in enumerate(pairs)]
    return task.collate(task.encode(examples, train=True), task.pad_id, train=True)


def test_targets_drop_the_start_token_and_end_with_eos(tokenizer, model_dir):
    task = get_task("translation")(tokenizer, hp())
    model = load_model(task, model_dir)
    assert task.decoder_start_token_id == model.config.decoder_start_token_id == tokenizer.cls_token_id
    (feature,) = task.encode([TranslationExample("0", *PAIRS[0])], train=True)
    assert feature["labels"][0] != tokenizer.cls_token_id and feature["labels"][-1] == tokenizer.sep_token_id
    assert tokenizer.decode(feature["labels"], skip_special_tokens=True) == PAIRS[0][1]


@pytest.mark.filterwarnings("ignore:Version v4.12.0:FutureWarning")  # HF's note on its own loss (eps 0)
@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_label_smoothing_loss_matches_a_direct_computation(tokenizer, model_dir, eps):
    task = get_task("translation")(tokenizer, hp(label_smoothing=eps))
    model = load_model(task, model_dir).eval()
    batch = batch_for(task, PAIRS[:3])
    with torch.no_grad():
        loss = task.loss(model, batch)
        decoder_input_ids, decoder_mask = task.decoder_inputs(batch["labels"])
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                       decoder_input_ids=decoder_input_ids, decoder_attention_mask=decoder_mask).logits
        logp = logits.log_softmax(-1)
        real = batch["labels"] != -100
        nll = -logp.gather(-1, batch["labels"].clamp(min=0).unsqueeze(-1)).squeeze(-1)
        uniform = -logp.mean(-1)  # cross-entropy against the uniform distribution over the vocabulary
        direct = ((1 - eps) * nll + eps * uniform)[real].mean()
        assert torch.allclose(loss, direct, atol=1e-5)
        if eps == 0.0:  # without smoothing: the model's own teacher-forced loss (HF shifts the labels itself)
            own = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"])
            assert torch.allclose(loss, own.loss, atol=1e-5)


def test_padding_carries_no_loss(tokenizer, model_dir):
    task = get_task("translation")(tokenizer, hp(label_smoothing=0.1))
    model = load_model(task, model_dir).eval()
    pairs = [PAIRS[4], PAIRS[5]]  # a long and a short pair: the short one is padded on both sides
    with torch.no_grad():
        batch = batch_for(task, pairs)
        assert (batch["labels"] == -100).any() and (batch["attention_mask"] == 0).any()
        alone = [batch_for(task, [p]) for p in pairs]
        n = [int((b["labels"] != -100).sum()) for b in alone]
        summed = sum(task.loss(model, b) * k for b, k in zip(alone, n, strict=True))
        assert torch.allclose(task.loss(model, batch), summed / sum(n), atol=1e-5)


# -- generation and metrics ---------------------------------------------------------------------------------------

def single_generate(model, tokenizer, text: str, **kw) -> str:
    """A plain generate() call on one sentence, no padding."""
    enc = tokenizer([text], return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**enc, do_sample=False, **kw)
    return tokenizer.decode(out[0, 1:], skip_special_tokens=True).strip()


def test_translate_cli_keeps_lines_order_and_equals_unbatched_generate(tmp_path, model_dir, tokenizer, capsys):
    lines = ["the cat sleeps on the red chair near an open window", "", "house", "the house is small",
             "an open window", "the red chair", "", "the cat"]
    src = tmp_path / "src.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out" / "hyp.txt"
    assert main(["translate", "--model", str(model_dir), "--src", str(src), "--out", str(out), "--beam", "3",
                 "--batch-size", "3", "--max-new-tokens", "10", "--no-progress"]) == 0
    hyps = out.read_text(encoding="utf-8").split("\n")
    assert hyps[-1] == "" and len(hyps) - 1 == len(lines)
    model = load_seq2seq(model_dir)
    for text, hyp in zip(lines, hyps, strict=False):
        expected = single_generate(model, tokenizer, text, num_beams=3, max_new_tokens=10) if text else ""
        assert hyp == expected
    assert "translated 8 lines" in capsys.readouterr().out


def test_translate_cli_scores_against_references(tmp_path, model_dir, capsys):
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text("".join(a + "\n" for a, _ in PAIRS), encoding="utf-8")
    ref.write_text("".join(b + "\n" for _, b in PAIRS), encoding="utf-8")
    out = tmp_path / "hyp.txt"
    assert main(["translate", "--model", str(model_dir), "--src", str(src), "--out", str(out), "--ref", str(ref),
                 "--max-new-tokens", "6", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    hyps = out.read_text(encoding="utf-8").splitlines()
    bleu = sacrebleu.metrics.BLEU().corpus_score(hyps, [[b for _, b in PAIRS]])
    assert f"BLEU {bleu.score:.2f}  nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" in printed
    assert "chrF " in printed and "nc:6|nw:0" in printed
    ref.write_text("one line\n", encoding="utf-8")
    assert main(["translate", "--model", str(model_dir), "--src", str(src), "--out", str(out), "--ref", str(ref),
                 "--no-progress"]) == 2
    assert f"{ref}: 1 lines, but {src} has {len(PAIRS)}" in capsys.readouterr().err


def test_blank_and_one_token_inputs(tmp_path, model_dir, tokenizer):
    model = load_seq2seq(model_dir)
    hyps = generate_translations(model, tokenizer, ["", "   ", "a", "the"], num_beams=2, max_new_tokens=5)
    assert hyps[:2] == ["", ""]
    assert hyps[2:] == [single_generate(model, tokenizer, t, num_beams=2, max_new_tokens=5) for t in ("a", "the")]
    src, out = tmp_path / "blank.txt", tmp_path / "out.txt"
    src.write_text("\n\n\n", encoding="utf-8")  # only blank lines: as many blank lines out
    assert main(["translate", "--model", str(model_dir), "--src", str(src), "--out", str(out), "--no-progress"]) == 0
    assert out.read_text(encoding="utf-8") == "\n\n\n"


def test_translate_reads_stdin_and_writes_stdout(tmp_path, model_dir, tokenizer):
    """`metaxlm translate --model M` with no --src/--out is a filter: one line out per line in, same order, blank
    stays blank, a last line without newline counted; status on stderr, never mixed into the translations."""
    import warm_cli

    lines = ["the house is small", "", "an open window", "the cat"]
    run = warm_cli.run(["translate", "--model", str(model_dir), "--beam", "2", "--max-new-tokens", "6",
                        "--no-progress"], input="\n".join(lines).encode(), text=False)
    assert run.returncode == 0, run.stderr.decode()
    out = run.stdout.decode("utf-8").split("\n")
    assert out[-1] == "" and len(out) - 1 == len(lines)
    model = load_seq2seq(model_dir)
    assert out[:-1] == [single_generate(model, tokenizer, t, num_beams=2, max_new_tokens=6) if t else ""
                        for t in lines]
    assert "translated 4 lines -> standard output" in run.stderr.decode()
    bad = warm_cli.run(["translate", "--model", str(model_dir), "--no-progress"], input=b"fine\n\xff\xfe broken\n",
                       text=False)
    assert bad.returncode == 2 and bad.stdout == b""
    assert bad.stderr.decode().strip().splitlines() == [bad.stderr.decode().strip()]  # one line
    assert "<stdin>:2: not UTF-8" in bad.stderr.decode()


def test_a_line_longer_than_the_model_is_truncated_and_counted(tmp_path, model_dir, tokenizer, capsys):
    long = " ".join(["the red chair near an open window"] * 40)
    src, out = tmp_path / "src.txt", tmp_path / "out.txt"
    src.write_text(f"the cat\n{long}\n\n{long}\n", encoding="utf-8")
    assert main(["translate", "--model", str(model_dir), "--src", str(src), "--out", str(out), "--max-source-len",
                 "12", "--max-new-tokens", "5", "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "warning: 2 of 4 lines are longer than 12 source tokens" in err and len(err.strip().splitlines()) == 1
    hyps = out.read_text(encoding="utf-8").split("\n")
    assert len(hyps) == 5 and hyps[2] == ""
    # what was translated is the tokenizer's own truncation of the line
    cut = tokenizer.decode(tokenizer(long, truncation=True, max_length=12)["input_ids"], skip_special_tokens=True)
    model = load_seq2seq(model_dir)
    assert hyps[1] == hyps[3] == single_generate(model, tokenizer, cut, num_beams=4, max_new_tokens=5)
    src.write_text("the cat\n" + " ".join(["the red chair"] * 8) + "\n", encoding="utf-8")
    assert main(["translate", "--model", str(model_dir), "--src", str(src), "--out", str(out), "--max-new-tokens",
                 "5", "--no-progress"]) == 0  # within the model's own maximum (64): no warning
    assert "warning" not in capsys.readouterr().err


def test_translate_cli_errors_are_one_line(tmp_path, model_dir, tokenizer, capsys):
    cfg = transformers.BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=32)
    transformers.BertForMaskedLM(cfg).save_pretrained(tmp_path / "mlm")
    capsys.readouterr()  # the save's own progress output
    src = tmp_path / "src.txt"
    src.write_text("the cat\n", encoding="utf-8")
    assert main(["translate", "--model", str(tmp_path / "mlm"), "--src", str(src), "--out", str(tmp_path / "o"),
                 "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(tmp_path / "mlm") in err and "not a sequence-to-sequence" in err
    assert not (tmp_path / "o").exists()
    assert main(["translate", "--model", str(model_dir), "--ref", str(src), "--no-progress"]) == 2
    assert "--ref needs --src FILE" in capsys.readouterr().err


def test_scores_equal_sacrebleu_called_directly():
    hyps = ["the cat sleeps on the chair", "a small house", "", "das Haus ist klein"]
    refs = ["the cat sleeps on the red chair", "the house is small", "an open window", "das Haus ist klein"]
    scores = corpus_scores(hyps, refs)
    bleu, chrf = sacrebleu.metrics.BLEU(), sacrebleu.metrics.CHRF()
    assert scores["bleu"] == bleu.corpus_score(hyps, [refs]).score
    assert scores["chrf"] == chrf.corpus_score(hyps, [refs]).score
    assert scores["signatures"] == {"bleu": str(bleu.get_signature()), "chrf": str(chrf.get_signature())}
    zh = corpus_scores(["房子很小"], ["房子很小猫"], target_lang="zh")
    assert "tok:zh" in zh["signatures"]["bleu"]
    assert zh["bleu"] == sacrebleu.metrics.BLEU(tokenize="zh").corpus_score(["房子很小"], [["房子很小猫"]]).score
    assert "tok:char" in corpus_scores(["a"], ["a"], target_lang="ja")["signatures"]["bleu"]


def test_a_model_that_is_no_seq2seq_is_named(tmp_path, tokenizer):
    cfg = transformers.BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=32)
    transformers.BertForMaskedLM(cfg).save_pretrained(tmp_path / "mlm")
    with pytest.raises(MetaXLMError, match=r"not a sequence-to-sequence model.*"
                                           r"metaxlm finetune translation_demo seq2seq.init=encoder"):
        load_seq2seq(tmp_path / "mlm")


# -- the task -------------------------------------------------------------------------------------------------------

def test_a_tiny_model_overfits_and_reproduces_its_pairs(tokenizer, tmp_path):
    model_dir = tiny_seq2seq(tokenizer, tmp_path / "m", hidden=48)
    h = hp(lr=5e-3, max_steps=120, batch_size=6, label_smoothing=0.1, num_beams=1)
    task = get_task("translation")(tokenizer, h)
    set_seed(0)
    model = load_model(task, model_dir)
    examples = [TranslationExample(str(i), a, b) for i, (a, b) in enumerate(PAIRS)]
    losses: list[float] = []
    finetune(model, task, examples, h, seed=0, progress=False, history=losses)
    assert losses[-1] < losses[0] / 3
    greedy = predict(model, task, examples, h)
    assert greedy == [b for _, b in PAIRS]
    assert task.score(examples, greedy, metric="bleu", lang="de") == pytest.approx(100.0)


def test_a_token_budget_counts_source_and_target_and_still_learns(tokenizer, tmp_path):
    model_dir = tiny_seq2seq(tokenizer, tmp_path / "m", hidden=48)
    h = hp(lr=5e-3, max_steps=120, batch_size=6, batch_tokens=60, label_smoothing=0.1, num_beams=1)
    task = get_task("translation")(tokenizer, h)
    examples = [TranslationExample(str(i), a, b) for i, (a, b) in enumerate(PAIRS)]
    features = task.encode(examples, train=True)
    assert [task.feature_tokens(f) for f in features] == [len(f["input_ids"]) + len(f["labels"]) for f in features]
    set_seed(0)
    model = load_model(task, model_dir)
    losses: list[float] = []
    finetune(model, task, examples, h, seed=0, progress=False, history=losses)
    assert losses[-1] < losses[0] / 3
    assert predict(model, task, examples, h) == [b for _, b in PAIRS]


def test_scores_after_chosen_steps_and_they_do_not_disturb_training(tokenizer, model_dir, tmp_path):
    s = spec(tmp_path, hyperparameters=hp(max_steps=4, eval_steps=[2, 3]).model_dump())
    entry = run_task(s, model_dir, tmp_path / "out", scenario="supervised", tokenizer_dir=model_dir, progress=False)
    assert entry["scenario"] == "supervised" and list(entry["per_language"]) == ["de"]
    curve = entry["curve"]["de"]
    assert curve["steps"] == [2, 3, 4]
    assert set(curve) == {"steps", "bleu", "chrf"}
    assert curve["bleu"][-1]["runs"] == entry["per_language"]["de"]["runs"]
    report = entry["reports"]["de"]
    assert report["bleu"]["mean"] == entry["per_language"]["de"]["mean"]
    assert report["signatures"]["bleu"].startswith("nrefs:1|") and "chrf" in report["signatures"]
    # scoring at steps 2 and 3 leaves the training trajectory as it was
    task = get_task("translation")(tokenizer, s.hyperparameters)
    examples = load_examples("parallel_tsv", tmp_path / "en-de.tsv")
    weights = []
    for evaluate in (False, True):
        set_seed(0)
        model = load_model(task, model_dir)
        hook = (lambda step, total, m=model: predict(m, task, examples, s.hyperparameters)) if evaluate else None
        finetune(model, task, examples, s.hyperparameters, seed=0, progress=False, on_step=hook)
        weights.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    assert torch.equal(weights[0], weights[1])


def test_translation_runs_supervised_only(tmp_path, model_dir):
    with pytest.raises(MetaXLMError, match="scenario zero_shot does not apply to translation"):
        run_task(spec(tmp_path), model_dir, scenario="zero_shot", tokenizer_dir=model_dir, progress=False)


def test_demo_task_config_loads():
    s = load_task_spec("translation_demo")
    assert s.type == "translation" and s.path("test", "de").name == "en-de.tsv.xz"
    assert s.hyperparameters.label_smoothing == 0.1 and s.hyperparameters.eval_steps == [100, 200]
    assert s.path("train", "de").exists() and s.path("test", "fr").exists()
    assert not math.isnan(s.hyperparameters.length_penalty)


# -- assembling the encoder-decoder from an encoder at fine-tuning time (spec.seq2seq) ------------------------------

def tiny_mlm(tokenizer, out, seed: int = 0):
    cfg = transformers.BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
                                  intermediate_size=64, max_position_embeddings=64, pad_token_id=tokenizer.pad_token_id)
    transformers.set_seed(seed)
    transformers.BertForMaskedLM(cfg).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.mark.parametrize("init", ["encoder", "random"])
def test_a_translation_task_assembles_its_encoder_decoder_from_an_encoder(tokenizer, tmp_path, init):
    mlm_dir = tiny_mlm(tokenizer, tmp_path / "mlm")
    s = spec(tmp_path, seq2seq={"init": init, "decoder_layers": 2})
    task = get_task("translation")(tokenizer, s.hyperparameters)
    task.spec = s
    weights = []
    for _ in range(2):  # the same fine-tuning seed: the same new weights
        set_seed(3)
        model = load_model(task, mlm_dir)
        assert isinstance(model, transformers.EncoderDecoderModel)
        assert model.config.decoder.num_hidden_layers == 2 and model.config.encoder.num_hidden_layers == 3
        weights.append(model.state_dict())
    assert all(torch.equal(v, weights[1][k]) for k, v in weights[0].items())
    mlm = transformers.BertForMaskedLM.from_pretrained(mlm_dir)
    copied = torch.equal(model.encoder.encoder.layer[0].attention.self.query.weight,
                         mlm.bert.encoder.layer[0].attention.self.query.weight)
    assert copied == (init == "encoder")
    # the weights the source did not give, which hyperparameters.head_lr_scale speeds up: all of a random model,
    # else the new cross-attention and pooler
    names = {n for n, _ in model.named_parameters()}
    expected = names if init == "random" else \
        {n for n in names if ".crossattention." in n or n.startswith("encoder.pooler.")}
    assert new_parameter_names(model) == expected
    if init == "encoder":  # the decoder is the encoder's last 2 layers; its cross-attention is new
        assert torch.equal(model.decoder.bert.encoder.layer[0].output.dense.weight,
                           mlm.bert.encoder.layer[1].output.dense.weight)
    entry = run_task(s, mlm_dir, tmp_path / "out", scenario="supervised", tokenizer_dir=mlm_dir, progress=False)
    assert math.isfinite(entry["per_language"]["de"]["mean"])


@pytest.mark.parametrize("fast", [False, True])
def test_pretrained_cross_attention_trains_at_the_body_rate_unless_asked(tokenizer, tmp_path, fast):
    """init veco: the VECO layers' cross-attention comes pretrained, so only the pooler is new (head_lr_scale);
    seq2seq.fast_cross_attention puts the cross-attention at head_lr_scale too, and the optimizer gets it."""
    from metaxlm.compute.optim import adamw
    from metaxlm.models.archs.veco import veco_from_encoder

    mlm_dir = tiny_mlm(tokenizer, tmp_path / "mlm")
    veco_dir = tmp_path / "veco"
    veco_from_encoder(transformers.BertForMaskedLM.from_pretrained(mlm_dir), init="random",
                      seed=1).save_pretrained(veco_dir)
    tokenizer.save_pretrained(veco_dir)
    s = spec(tmp_path, seq2seq={"init": "veco", "decoder_layers": 2, "fast_cross_attention": fast})
    task = get_task("translation")(tokenizer, s.hyperparameters)
    task.spec = s
    set_seed(0)
    model = load_model(task, veco_dir)
    names = {n for n, _ in model.named_parameters()}
    cross = {n for n in names if ".crossattention." in n}
    assert cross and new_parameter_names(model) == \
        {n for n in names if n.startswith("encoder.pooler.")} | (cross if fast else set())
    optimizer = adamw(model.named_parameters(), lr=1e-4, weight_decay=0.0,
                      lr_scales={n: 20.0 for n in new_parameter_names(model)})
    by_id = {id(p): n for n, p in model.named_parameters()}
    fast_names = {by_id[id(p)] for g in optimizer.param_groups if g["lr"] == pytest.approx(2e-3) for p in g["params"]}
    assert (cross <= fast_names) == fast


def test_seq2seq_assembly_is_for_translation_tasks_only(tmp_path):
    with pytest.raises(ValidationError, match="translation tasks only"):
        TaskSpec(name="x", type="classification", format="xnli", metric="accuracy", languages=["en"],
                 train="t", test="t", seq2seq={"init": "random"})
    with pytest.raises(ValidationError):
        spec(tmp_path, seq2seq={"init": "xavier"})


def test_a_vocabulary_trimmed_to_the_training_pairs(tokenizer, tmp_path):
    """seq2seq.vocabulary: train keeps the pieces both sides of the training pairs use: the pairs tokenize to the
    same pieces, each kept row is the source model's row of that piece, and the saved model (with its trimmed
    tokenizer) loads and translates on its own."""
    import shutil

    from metaxlm.vocab.load import SPM_FILE

    mlm_dir = tiny_mlm(tokenizer, tmp_path / "mlm")
    shutil.copyfile(Path(tokenizer.name_or_path) / SPM_FILE, mlm_dir / SPM_FILE)  # as metaxlm's exports hold it
    s = spec(tmp_path, seq2seq={"init": "encoder", "decoder_layers": 2, "vocabulary": "train"})
    task = get_task("translation")(tokenizer, s.hyperparameters)
    task.spec = s
    examples = [TranslationExample(str(i), a, b) for i, (a, b) in enumerate(PAIRS)]
    set_seed(0)
    model = load_model(task, mlm_dir, examples)
    trimmed = task.tokenizer
    assert len(trimmed) < len(tokenizer) and model.config.encoder.vocab_size == len(trimmed)
    assert model.decoder.get_output_embeddings().weight.shape[0] == len(trimmed)
    for text in [t for pair in PAIRS for t in pair]:
        assert trimmed.tokenize(text) == tokenizer.tokenize(text)
    mlm = transformers.BertForMaskedLM.from_pretrained(mlm_dir)
    full, kept = tokenizer.get_vocab(), trimmed.get_vocab()
    for piece, new_id in kept.items():
        assert torch.equal(model.encoder.embeddings.word_embeddings.weight[new_id],
                           mlm.bert.embeddings.word_embeddings.weight[full[piece]])
    assert (trimmed.pad_token_id, trimmed.cls_token_id, trimmed.sep_token_id) == \
        (tokenizer.pad_token_id, tokenizer.cls_token_id, tokenizer.sep_token_id)
    # end to end: fine-tuned, saved with its trimmed tokenizer, translated by `metaxlm translate`
    run_task(s, mlm_dir, tmp_path / "out", scenario="supervised", tokenizer_dir=mlm_dir, progress=False,
             save_models=tmp_path / "out" / "models")
    saved = tmp_path / "out" / "models" / "de-seed0"
    reloaded = load_seq2seq(saved)
    assert reloaded.config.encoder.vocab_size == len(trimmed)
    from metaxlm.finetune.translate import decoding_settings

    h = s.hyperparameters  # the saved model translates as it was scored
    assert decoding_settings(reloaded) == {"num_beams": h.num_beams, "length_penalty": h.length_penalty,
                                           "no_repeat_ngram_size": h.no_repeat_ngram_size}
    src = tmp_path / "src.txt"
    src.write_text("the house is small\n\nthe cat\n", encoding="utf-8")
    assert main(["translate", "--model", str(saved), "--src", str(src), "--out", str(tmp_path / "hyp.txt"),
                 "--no-progress"]) in (0, None)
    lines = (tmp_path / "hyp.txt").read_text(encoding="utf-8").split("\n")
    assert len(lines) == 4 and lines[1] == ""  # three lines and the final newline; the blank stays blank


def test_shared_embeddings_are_one_matrix_and_survive_saving(tokenizer, tmp_path):
    mlm_dir = tiny_mlm(tokenizer, tmp_path / "mlm")
    s = spec(tmp_path, seq2seq={"init": "encoder", "decoder_layers": 2, "share_embeddings": True})
    task = get_task("translation")(tokenizer, s.hyperparameters)
    task.spec = s
    set_seed(0)
    model = load_model(task, mlm_dir)
    enc = model.encoder.embeddings.word_embeddings.weight
    assert model.decoder.bert.embeddings.word_embeddings.weight is enc
    assert model.decoder.get_output_embeddings().weight is enc
    examples = [TranslationExample(str(i), a, b) for i, (a, b) in enumerate(PAIRS)]
    finetune(model, task, examples, s.hyperparameters, seed=0, progress=False)
    from metaxlm.finetune.runner import save_finetuned

    reloaded = load_seq2seq(save_finetuned(model, task.tokenizer, tmp_path / "saved"))
    assert torch.equal(reloaded.encoder.embeddings.word_embeddings.weight, enc)
    assert torch.equal(reloaded.decoder.bert.embeddings.word_embeddings.weight, enc)


def test_dropout_is_set_everywhere_and_recorded(tokenizer, model_dir, tmp_path):
    h = hp(max_steps=2, dropout=0.3)
    task = get_task("translation")(tokenizer, h)
    set_seed(0)
    model = load_model(task, model_dir)
    examples = [TranslationExample(str(i), a, b) for i, (a, b) in enumerate(PAIRS)]
    finetune(model, task, examples, h, seed=0, progress=False)
    rates = {m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)}
    assert rates == {0.3}
    for config in (model.config.encoder, model.config.decoder):
        assert config.hidden_dropout_prob == 0.3 and config.attention_probs_dropout_prob == 0.3
    assert Hyperparameters(dropout="0").dropout == 0.0 and Hyperparameters().dropout is None


def test_finished_runs_are_reused_by_a_rerun_with_the_same_key(tokenizer, model_dir, tmp_path, monkeypatch):
    """An interrupted task resumes after its last finished (language, seed) run: with the same resume key a rerun
    trains nothing already finished; another key (other settings or weights) trains again."""
    import metaxlm.finetune.runner as runner

    s = spec(tmp_path)
    out = tmp_path / "out"
    first = run_task(s, model_dir, out, scenario="supervised", seeds=[0], tokenizer_dir=model_dir, progress=False,
                     resume_key="k1")
    assert (out / "supervised-runs" / "de-seed0.json").exists()

    def no_training(*args, **kwargs):
        raise AssertionError("a finished run was trained again")

    monkeypatch.setattr(runner, "finetune", no_training)
    again = run_task(s, model_dir, out, scenario="supervised", seeds=[0], tokenizer_dir=model_dir, progress=False,
                     resume_key="k1")
    assert again["per_language"] == first["per_language"] and again["reports"] == first["reports"]
    with pytest.raises(AssertionError, match="trained again"):  # a new seed is a new run
        run_task(s, model_dir, out, scenario="supervised", seeds=[0, 1], tokenizer_dir=model_dir, progress=False,
                 resume_key="k1")
    with pytest.raises(AssertionError, match="trained again"):  # other settings: nothing reused
        run_task(s, model_dir, out, scenario="supervised", seeds=[0], tokenizer_dir=model_dir, progress=False,
                 resume_key="k2")


def test_a_dev_set_cut_from_the_training_file_is_never_trained_on(tmp_path):
    """dev_from_train holds n items of each train file out (largest sha256 of the id), max_train_items caps the
    rest, and evaluate_on: dev scores those items instead of the test file."""
    from metaxlm.finetune.task_data import TaskData

    s = spec(tmp_path, dev_from_train=2, max_train_items=3)
    data = TaskData(s)
    train, dev = data.train("de"), data.held_out("de")
    assert len(dev) == 2 and len(train) == 3
    assert not {(ex.source, ex.target) for ex in train} & {(ex.source, ex.target) for ex in dev}
    assert data.test("de", False) == data.load("test", "de")  # scoring the test file unless asked otherwise
    dev_data = TaskData(spec(tmp_path, dev_from_train=2, evaluate_on="dev"))
    assert [ex.id for ex in dev_data.test("de", False)] == [ex.id for ex in dev]
    assert len(dev_data.train("de")) == len(PAIRS) - 2
    with pytest.raises(ValidationError, match="dev_from_train"):
        spec(tmp_path, dev_from_train=2, train_from="test_half")


def test_no_repeated_ngrams_when_asked(tokenizer, model_dir):
    """no_repeat_ngram_size: 1 (HF generate's): no token twice in an output; an untrained model repeats without it."""
    from metaxlm.finetune.translate import DECODING_DEFAULTS, decoding_settings

    model = load_seq2seq(model_dir)
    texts = [a for a, _ in PAIRS]
    kw = {"num_beams": 2, "max_new_tokens": 12, "batch_size": 3}
    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in
           generate_translations(model, tokenizer, texts, **kw, no_repeat_ngram_size=1)]
    assert all(len(set(row)) == len(row) for row in ids)
    plain = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in generate_translations(model, tokenizer,
                                                                                              texts, **kw)]
    assert any(len(set(row)) < len(row) for row in plain)
    assert decoding_settings(model) == DECODING_DEFAULTS  # a model fine-tuning did not save: the defaults


def test_curve_points_on_a_fixed_subset_and_the_final_score_on_every_item(tokenizer, model_dir, tmp_path,
                                                                             monkeypatch):
    """hyperparameters.curve_items: the points during training score the same subset (smallest sha256 of the id),
    the curve's last point is the final model's score on that subset, the task's score uses every test item."""
    import metaxlm.finetune.runner as runner
    from metaxlm.finetune.task_data import cap

    s = spec(tmp_path, hyperparameters=hp(max_steps=4, eval_steps=[2, 3], curve_items=3).model_dump())
    scored: list[list[str]] = []
    real_predict = runner.predict

    def counting_predict(model, task, examples, hp, **kw):
        scored.append([ex.id for ex in examples])
        return real_predict(model, task, examples, hp, **kw)

    monkeypatch.setattr(runner, "predict", counting_predict)
    entry = run_task(s, model_dir, tmp_path / "out", scenario="supervised", tokenizer_dir=model_dir, progress=False,
                     save_models=tmp_path / "models")
    examples = load_examples("parallel_tsv", tmp_path / "en-de.tsv")
    subset = cap(examples, 3)
    assert [len(ids) for ids in scored] == [3, 3, len(PAIRS)]  # @2, @3 on the subset; the final test on all
    assert scored[0] == scored[1] == [ex.id for ex in subset]
    curve = entry["curve"]["de"]
    assert curve["steps"] == [2, 3, 4]
    # the last point: the final model's predictions on the subset, scored as the subset alone
    model = load_seq2seq(tmp_path / "models" / "de-seed0")
    task = get_task("translation")(tokenizer, s.hyperparameters)
    task.decoder_start_token_id = model.config.decoder_start_token_id
    final = real_predict(model, task, subset, s.hyperparameters)
    assert curve["bleu"][-1]["runs"] == [pytest.approx(task.score(subset, final, metric="bleu", lang="de"))]
    full = real_predict(model, task, examples, s.hyperparameters)
    assert entry["per_language"]["de"]["runs"] == [pytest.approx(task.score(examples, full, metric="bleu", lang="de"))]
    detail = __import__("json").loads((tmp_path / "out" / "supervised.json").read_text())["runs"][0]
    assert detail["curve_items"] == {"de": 3} and detail["machine"]["threads"] >= 1
    assert entry["curve_items"] == 3


def test_finished_runs_recorded_elsewhere_are_reused_by_a_fresh_run(tokenizer, model_dir, tmp_path, monkeypatch):
    """finished_runs: each finished run is recorded there too (results only); a run in a new directory (another
    machine, a fresh clone) with the same key reuses it instead of training, and keeps it in its own store; another
    key (other settings or model files) is refused before any training, naming the record, which stays as it was
    (two series are never mixed in one archive); in another archive it trains."""
    import metaxlm.finetune.runner as runner

    s = spec(tmp_path)
    archive = tmp_path / "docs" / "runs"
    first = run_task(s, model_dir, tmp_path / "out1", scenario="supervised", seeds=[0], tokenizer_dir=model_dir,
                     progress=False, resume_key="k1", finished_runs=archive)
    assert (archive / "supervised-runs" / "de-seed0.json").exists()

    def no_training(*args, **kwargs):
        raise AssertionError("a finished run was trained again")

    monkeypatch.setattr(runner, "finetune", no_training)
    again = run_task(s, model_dir, tmp_path / "out2", scenario="supervised", seeds=[0], tokenizer_dir=model_dir,
                     progress=False, resume_key="k1", finished_runs=archive)
    assert again["per_language"] == first["per_language"] and again["reports"] == first["reports"]
    assert (tmp_path / "out2" / "supervised-runs" / "de-seed0.json").exists()
    record = archive / "supervised-runs" / "de-seed0.json"
    before = record.read_bytes()
    with pytest.raises(DataError, match=r"de-seed0\.json.*other task settings or model files \(key k1; this run's is "
                                        r"k2\).*evaluate\.finished_runs"):
        run_task(s, model_dir, tmp_path / "out3", scenario="supervised", seeds=[0], tokenizer_dir=model_dir,
                 progress=False, resume_key="k2", finished_runs=archive)
    assert record.read_bytes() == before
    with pytest.raises(AssertionError, match="trained again"):
        run_task(s, model_dir, tmp_path / "out3", scenario="supervised", seeds=[0], tokenizer_dir=model_dir,
                 progress=False, resume_key="k2", finished_runs=tmp_path / "docs" / "series-2")


def test_one_direction_per_process_records_runs_the_full_run_reuses(tokenizer, model_dir, tmp_path, monkeypatch):
    """configs/translation.yaml's 'data.languages=[en,fr]' (one direction per process): the plan's run keys are
    those of the configured languages, and the en→fr run it records is reused by a run over every language, which
    trains only en→de."""
    import metaxlm.finetune.runner as runner
    from metaxlm.config import load_config
    from metaxlm.evaluation import recipe

    target = recipe.ModelToEvaluate("veco", tmp_path, tmp_path, "veco")
    def keys(overrides):
        plan = recipe.plan_tasks(load_config(REPO / "configs" / "translation.yaml", overrides), target)
        return {task.name: run_fingerprint(task.spec, task.scenario, model_key="m") for task in plan}
    assert keys(["data.languages=[en,fr]"]) == keys([])

    s = spec(tmp_path, languages=["en", "de", "fr"])
    archive = tmp_path / "records"
    run_task(s, model_dir, tmp_path / "out1", scenario="supervised", seeds=[0], tokenizer_dir=model_dir,
             progress=False, resume_key="k", finished_runs=archive, languages=["en", "fr"])
    assert sorted(f.name for f in (archive / "supervised-runs").iterdir()) == ["fr-seed0.json"]
    trained = []
    finetune = runner.finetune
    def counted(*args, **kwargs):
        trained.append(kwargs["desc"])
        return finetune(*args, **kwargs)
    monkeypatch.setattr(runner, "finetune", counted)
    both = run_task(s, model_dir, tmp_path / "out2", scenario="supervised", seeds=[0], tokenizer_dir=model_dir,
                    progress=False, resume_key="k", finished_runs=archive, languages=["en", "de", "fr"])
    assert trained == ["toy_mt de seed 0"] and set(both["per_language"]) >= {"de", "fr"}
    assert sorted(f.name for f in (archive / "supervised-runs").iterdir()) == ["de-seed0.json", "fr-seed0.json"]


def test_a_translation_run_is_keyed_by_the_model_files_it_reads(tokenizer, tmp_path):
    """init random reads the shapes and the tokenizer, not the weights; init veco also reads a VECO run's
    final/veco/; init encoder reads the weights."""
    from safetensors.torch import load_file, save_file

    from metaxlm.finetune.resume_key import task_model_fingerprint

    final = tiny_mlm(tokenizer, tmp_path / "final")
    (final / "veco").mkdir()
    save_file({"w": torch.zeros(3)}, final / "veco" / "model.safetensors")
    (final / "veco" / "config.json").write_text("{}")

    def keys() -> dict[str, str]:
        return {init: task_model_fingerprint(spec(tmp_path, seq2seq={"init": init}), final, final)
                for init in ("random", "encoder", "veco")}

    before = keys()
    assert len(set(before.values())) == 3
    weights = load_file(final / "model.safetensors")
    save_file({k: v + 1 for k, v in weights.items()}, final / "model.safetensors")
    after_body = keys()
    assert after_body["random"] == before["random"]
    assert after_body["encoder"] != before["encoder"] and after_body["veco"] != before["veco"]
    save_file({"w": torch.ones(3)}, final / "veco" / "model.safetensors")
    after_veco = keys()
    assert after_veco["veco"] != after_body["veco"] and after_veco["encoder"] == after_body["encoder"]
    with (final / "tokenizer.json").open("a") as f:  # another tokenizer file (still valid JSON)
        f.write("\n")
    assert keys()["random"] != before["random"]  # the tokenizer is read by every init


def test_a_finished_run_keeps_its_outputs_beside_its_record(tokenizer, model_dir, tmp_path):
    """Every test output goes to <run>.outputs.jsonl in the test file's order (source and reference as read), and
    scoring those outputs gives the recorded score; the record (also the one in finished_runs) keeps the first
    RECORDED_OUTPUTS of them, not a choice; a rerun that reuses the record neither trains nor drops the file."""
    import json

    from metaxlm.config import RECORDED_OUTPUTS
    from metaxlm.finetune.summaries import machine_text

    s = spec(tmp_path)
    out, archive = tmp_path / "out", tmp_path / "archive"
    entry = run_task(s, model_dir, out, scenario="supervised", seeds=[0], tokenizer_dir=model_dir, progress=False,
                     resume_key="k", finished_runs=archive)
    path = out / "supervised-runs" / "de-seed0.outputs.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [(r["lang"], r["source"], r["reference"]) for r in rows] == [("de", a, b) for a, b in PAIRS]
    assert all(isinstance(r["output"], str) for r in rows)
    task = get_task("translation")(tokenizer, s.hyperparameters)
    examples = load_examples("parallel_tsv", tmp_path / "en-de.tsv")
    assert [r["id"] for r in rows] == [ex.id for ex in examples]
    scored = task.score(examples, [r["output"] for r in rows], metric="bleu", lang="de")
    assert entry["per_language"]["de"]["runs"] == [pytest.approx(scored)]
    for record in (out / "supervised-runs" / "de-seed0.json", archive / "supervised-runs" / "de-seed0.json"):
        kept = json.loads(record.read_text(encoding="utf-8"))["detail"]["outputs"]
        assert kept == {"de": [{k: v for k, v in r.items() if k != "lang"} for r in rows[:RECORDED_OUTPUTS]]}
    before = path.read_bytes()
    again = run_task(s, model_dir, out, scenario="supervised", seeds=[0], tokenizer_dir=model_dir, progress=False,
                     resume_key="k")
    assert again["per_language"] == entry["per_language"] and path.read_bytes() == before
    # the task entry shows the same first rows (the report's examples), also when the run is reused
    first = [{k: v for k, v in r.items() if k != "lang"} for r in rows[:RECORDED_OUTPUTS]]
    assert entry["examples"] == again["examples"] == {"de": {"seed": 0, "rows": first}}
    assert entry["direction"] == "forward"
    detail = json.loads((out / "supervised-runs" / "de-seed0.json").read_text(encoding="utf-8"))["detail"]
    assert entry["training"]["runs"] == 1 and entry["training"]["steps"] == [detail["steps"]]
    assert entry["training"]["train_seconds"]["mean"] == detail["train_seconds"]
    assert entry["training"]["machines"] == {machine_text(detail): 1}
    assert machine_text(detail).startswith(f"{detail['machine']['cpu']} · ")


def test_training_summary_counts_each_kind_of_machine():
    from metaxlm.finetune.summaries import report_summary

    def run(seed: int, cpu: str, precision: dict, seconds: float) -> dict:
        return {"seed": seed, "label": "de", "steps": 2000, "train_seconds": seconds,
                "machine": {"cpu": cpu, "threads": 1}, "precision": precision}

    summary = report_summary([run(0, "AMD EPYC", {"train": "fp32", "test": "fp32"}, 9000.0),
                              run(1, "AMD EPYC", {"train": "fp32", "test": "fp32"}, 9600.0),
                              run(2, "Intel Xeon", {"train": "bf16", "test": "fp32"}, 3000.0),
                              run(3, "Intel Xeon", {}, 3000.0)], "bleu")["training"]
    assert summary["runs"] == 4 and summary["steps"] == [2000] and summary["train_seconds"]["mean"] == 6150.0
    assert summary["machines"] == {"AMD EPYC · 1 thread · fp32": 2, "Intel Xeon · 1 thread · train bf16, test fp32": 1,
                                   "Intel Xeon · 1 thread": 1}
    by_kind = summary["train_seconds_by_machine"]  # each kind's own time: a pooled mean is no machine's
    assert by_kind["AMD EPYC · 1 thread · fp32"]["mean"] == 9300.0
    assert by_kind["Intel Xeon · 1 thread · train bf16, test fp32"]["mean"] == 3000.0 and set(by_kind) == set(
        summary["machines"])


def test_examples_come_from_the_lowest_seed_whatever_the_order_runs_finished():
    from metaxlm.finetune.summaries import report_summary

    def run(seed: int) -> dict:
        return {"seed": seed, "label": "de", "outputs": {"de": [{"id": "0", "source": "a", "reference": "b",
                                                                  "output": f"seed {seed}"}]}}

    summary = report_summary([run(2), run(0), run(1)], "bleu")
    assert summary["examples"] == {"de": {"seed": 0, "rows": run(0)["outputs"]["de"]}}
    assert "training" not in summary  # records without times (written before they were kept) add no time
    assert "examples" not in report_summary([{"seed": 0, "label": "de"}], "bleu")  # a task type without outputs


def test_the_docs_recipe_translate_your_own_text_runs_as_written(tokenizer, tmp_path, monkeypatch):
    """docs/veco.md's "Translate your own text" (the README points to it): its task file and its two commands, run
    as written on a tiny VECO run's final/ (key=value overrides only shrink the budget), give a model that
    `metaxlm translate` uses as a filter: one line out per line in."""
    import shutil
    import subprocess
    import sys

    import yaml

    from metaxlm.models.archs.veco import veco_from_encoder
    from metaxlm.vocab.load import SPM_FILE

    doc = (REPO / "docs" / "veco.md").read_text(encoding="utf-8")
    block = doc.split('id="translate-your-own-text"', 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    task_yaml = block.split("<<'YAML'\n", 1)[1].split("\nYAML\n", 1)[0]
    commands = [line for line in block.split("\n", 1)[1].split("\nYAML\n", 1)[1].splitlines() if line.strip()]
    assert [c.split()[:2] for c in commands] == [["metaxlm", "finetune"], ["metaxlm", "translate"]]
    spec = yaml.safe_load(task_yaml)
    assert spec["seq2seq"]["init"] == "veco"

    monkeypatch.chdir(tmp_path)
    final = Path("runs/translation/pretrain/veco/final")  # as a VECO run lays it out: final/ and final/veco/
    tiny_mlm(tokenizer, final)
    veco_from_encoder(transformers.BertForMaskedLM.from_pretrained(final), init="random", seed=1).save_pretrained(
        final / "veco")
    tokenizer.save_pretrained(final / "veco")
    shutil.copyfile(Path(tokenizer.name_or_path) / SPM_FILE, final / SPM_FILE)  # as metaxlm's exports hold it
    Path("my").mkdir()
    for name in (spec["train"], spec["test"]):
        Path(name.format(lang="de")).write_text("".join(f"{a}\t{b}\n" for a, b in PAIRS), encoding="utf-8")
    Path("my_mt.yaml").write_text(task_yaml + "\n", encoding="utf-8")
    inputs = commands[1].split("<", 1)[1].split(">", 1)[0].strip()
    Path(inputs).write_text("the house is small\n\nthe cat\n", encoding="utf-8")

    tiny = ["hyperparameters.max_steps=3", "hyperparameters.batch_tokens=64", "hyperparameters.max_seq_len=16",
            "hyperparameters.num_beams=2", "hyperparameters.max_new_tokens=6", "seq2seq.decoder_layers=2"]
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "OMP_NUM_THREADS": "1"}
    finetune_cmd = commands[0].split("#")[0] + " --no-progress " + " ".join(tiny)
    done = subprocess.run(finetune_cmd, shell=True, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    done = subprocess.run(commands[1].split("#")[0], shell=True, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    output = commands[1].split(">", 1)[1].split("#")[0].strip()
    lines = Path(output).read_text(encoding="utf-8").split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[3] == ""  # three lines in, three out; the blank stays blank


@pytest.mark.parametrize("direction, fixed, pair", [("forward", {"source": "en", "target": None}, "en→de"),
                                                    ("reverse", {"source": None, "target": "en"}, "de→en")])
def test_an_entry_records_what_its_results_translate_from_and_into(tmp_path, direction, fixed, pair):
    """A reverse task (de→en) recorded `source: en`, which says the opposite of what it measured: the entry's
    source/target are the language every result translates from/into, None where it is each result's own."""
    import json

    from metaxlm.finetune.run_store import recorded_task_entry
    from metaxlm.report.cells import language_pair

    runs = tmp_path / "records" / "supervised-runs"
    runs.mkdir(parents=True)
    (runs / "de-seed0.json").write_text(json.dumps({"key": "k", "detail": {"seed": 0, "scores": {"de": 30.0}}}))
    entry = recorded_task_entry(spec(tmp_path, direction=direction), tmp_path / "records", scenario="supervised",
                                seeds=[0])
    assert {k: entry[k] for k in ("direction", "source", "target")} == {"direction": direction, **fixed}
    assert language_pair(entry, "de") == pair
    legacy = {**entry, "source": "en"}  # written before `target` was: `source` named the fixed language either way
    legacy.pop("target")
    assert language_pair(legacy, "de") == pair


def test_committed_translation_results_name_the_language_they_translate_from():
    """Every directional task entry under docs/results says what its results translate from and into."""
    import json

    from metaxlm.report.cells import report_hints

    checked = 0
    for path in sorted((REPO / "docs" / "results").rglob("*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            continue
        tasks = record.get("tasks") if isinstance(record, dict) else None
        for name, entry in (tasks if isinstance(tasks, dict) else {}).items():
            if isinstance(entry, dict) and report_hints(entry)["directional"] and entry.get("direction") == "reverse":
                checked += 1
                assert entry.get("source") is None and entry.get("target"), f"{path}: {name}"
    assert checked >= 2  # translation/results.veco.json and the EPYC series' veco


def test_each_translation_initialization_runs_on_its_own_model(tmp_path):
    """configs/translation.yaml: VECO's rows on the VECO run, the controls for VECO's pretraining on theirs — the
    start itself (mt_start_encoder, the paper's XLM-R row) and the MLM continuation on VECO's text
    (mt_mlm_encoder) — with the same fine-tuning as mt_encoder, the same VECO-pretrained-encoder row."""
    from metaxlm.config import load_config
    from metaxlm.evaluation import recipe

    cfg = load_config(REPO / "configs" / "translation.yaml")
    def planned(name, variant=None):
        target = recipe.ModelToEvaluate(name, tmp_path, tmp_path, variant)
        return {task.name: task.spec for task in recipe.plan_tasks(cfg, target)}
    veco, start, control = planned("veco", "veco"), planned("start"), planned("mlm_control", "mlm_control")
    assert list(veco) == ["mt_veco", "mt_encoder", "mt_random", "mt_veco_reverse"]
    assert list(start) == ["mt_start_encoder"] and list(control) == ["mt_mlm_encoder"]
    same = run_fingerprint(veco["mt_encoder"], "supervised", model_key="m")
    assert run_fingerprint(start["mt_start_encoder"], "supervised", model_key="m") == same
    assert run_fingerprint(control["mt_mlm_encoder"], "supervised", model_key="m") == same
    assert cfg.evaluate.models == {"start": "start_of:mlm_control"}
    assert set(cfg.train_for("mlm_control").objectives) == {"mlm_sides", "mlm"}
    assert cfg.train_for("mlm_control").steps == cfg.train_for("veco").steps
