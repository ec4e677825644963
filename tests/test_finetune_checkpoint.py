"""Fine-tuning checkpoints (metaxlm.finetune.checkpoint): a run interrupted right after any of its checkpoints and
run again continues from it to exactly the weights, losses and curve of a run never interrupted — a classifier that
trains only its used embedding rows (with dropout drawn from torch's generator, over epoch boundaries) and an
encoder-decoder —; a checkpoint of other settings is never resumed; a damaged one is an error naming its file; a
finished run leaves no checkpoint behind."""

import json
import random
import re

import pytest
import torch
import transformers
from conftest import WORDS
from test_translation import PAIRS, tiny_seq2seq

from metaxlm.data.examples import ClassificationExample, TranslationExample
from metaxlm.finetune import checkpoint as ckpt
from metaxlm.finetune.checkpoint import Checkpoints
from metaxlm.finetune.models import load_model
from metaxlm.finetune.runner import run_task
from metaxlm.finetune.spec import Hyperparameters, TaskSpec
from metaxlm.finetune.tasks import get_task
from metaxlm.finetune.trainer import finetune
from metaxlm.models.checkpoint import CorruptCheckpoint

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


class Interrupted(Exception):
    """Stands for the process dying right after a checkpoint was written."""


def interrupt_after(monkeypatch, saves: int) -> list[int]:
    """Make the `saves`-th checkpoint the last thing the run does; return the steps checkpointed."""
    original, steps = ckpt.save, []

    def save(checkpoints, **kw):
        original(checkpoints, **kw)
        steps.append(kw["step"])
        if len(steps) == saves:
            raise Interrupted

    monkeypatch.setattr(ckpt, "save", save)
    return steps


def classification_run(tokenizer, model_dir):
    rng = random.Random(0)
    data = [ClassificationExample(f"x{i}", " ".join(rng.choices(WORDS[lang], k=1 + i % 6)), lang)
            for i in range(14) for lang in [("en", "de", "ru")[i % 3]]]
    hp = Hyperparameters(lr=3e-3, batch_size=4, max_steps=9, max_seq_len=32, warmup_ratio=0.2)  # 4 batches an epoch
    task = get_task("classification")(tokenizer, hp)
    task.fit_labels(data)
    return task, data, model_dir


def translation_run(tokenizer, tmp_path):
    model_dir = tiny_seq2seq(tokenizer, tmp_path / "seq2seq")
    data = [TranslationExample(f"p{i}", a, b) for i, (a, b) in enumerate(PAIRS)]
    hp = Hyperparameters(lr=3e-3, batch_size=2, max_steps=7, max_seq_len=32, warmup_ratio=0.0)
    return get_task("translation")(tokenizer, hp), data, model_dir


def train(task, data, model_dir, checkpoints: Checkpoints | None):
    """One run: the model as the runner loads it, fine-tuned; (losses, weights, the caller's state)."""
    transformers.set_seed(0)
    model = load_model(task, model_dir, data)
    losses: list[float] = []
    extra = checkpoints.extra if checkpoints is not None else {}
    extra.setdefault("seen", [])

    def on_step(step, total):  # the caller's own state, kept in the checkpoints
        extra["seen"].append([step, round(losses[-1], 6)])

    finetune(model, task, data, task.hp, seed=3, progress=False, history=losses, on_step=on_step,
             checkpoints=checkpoints)
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    return losses, weights, extra


@pytest.mark.parametrize("kind,saves", [("classification", 1), ("classification", 4), ("classification", 8),
                                        ("translation", 3)])
def test_an_interrupted_run_continues_exactly(kind, saves, tokenizer, tiny_bert_dir, tmp_path, monkeypatch):
    task, data, model_dir = (classification_run(tokenizer, tiny_bert_dir) if kind == "classification"
                             else translation_run(tokenizer, tmp_path))
    reference = train(task, data, model_dir, None)
    checkpoints = Checkpoints(tmp_path / "ckpt", key="k", every_seconds=0)
    steps = interrupt_after(monkeypatch, saves)
    with pytest.raises(Interrupted):
        train(task, data, model_dir, checkpoints)
    assert steps == list(range(1, saves + 1))
    again = Checkpoints(tmp_path / "ckpt", key="k", every_seconds=0)
    losses, weights, extra = train(task, data, model_dir, again)
    assert again.resumed_at == [saves]
    assert losses == reference[0]
    assert extra["seen"] == reference[2]["seen"]
    assert weights.keys() == reference[1].keys()
    assert all(torch.equal(weights[k], reference[1][k]) for k in weights)


def test_a_checkpoint_of_other_settings_is_not_resumed(tokenizer, tiny_bert_dir, tmp_path, monkeypatch, capsys):
    task, data, model_dir = classification_run(tokenizer, tiny_bert_dir)
    reference = train(task, data, model_dir, None)
    interrupt_after(monkeypatch, 5)
    with pytest.raises(Interrupted):
        train(task, data, model_dir, Checkpoints(tmp_path / "ckpt", key="other settings", every_seconds=0))
    monkeypatch.undo()
    capsys.readouterr()
    fresh = Checkpoints(tmp_path / "ckpt", key="k", every_seconds=1e9)
    losses, weights, _ = train(task, data, model_dir, fresh)
    assert "holds a checkpoint of other settings or weights; starting again" in capsys.readouterr().err
    assert fresh.resumed_at == [] and not (tmp_path / "ckpt").exists()
    assert losses == reference[0]
    assert all(torch.equal(weights[k], reference[1][k]) for k in weights)


@pytest.mark.parametrize("damaged", ["model.safetensors", "trainer_state.json"])
def test_a_damaged_checkpoint_is_an_error_naming_the_file(damaged, tokenizer, tiny_bert_dir, tmp_path, monkeypatch):
    task, data, model_dir = classification_run(tokenizer, tiny_bert_dir)
    interrupt_after(monkeypatch, 2)
    with pytest.raises(Interrupted):
        train(task, data, model_dir, Checkpoints(tmp_path / "ckpt", key="k", every_seconds=0))
    path = tmp_path / "ckpt" / "step_00000002" / damaged
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(CorruptCheckpoint, match=f"{damaged}: sha256 does not match"):
        train(task, data, model_dir, Checkpoints(tmp_path / "ckpt", key="k", every_seconds=0))


def spec(tmp_path) -> TaskSpec:
    tsv = tmp_path / "en-de.tsv"
    tsv.write_text("".join(f"{a}\t{b}\n" for a, b in PAIRS), encoding="utf-8")
    hp = Hyperparameters(lr=3e-3, batch_size=2, max_steps=6, max_seq_len=32, warmup_ratio=0.0, num_beams=2,
                         max_new_tokens=12, eval_batch_size=4, eval_steps=[2, 4])
    return TaskSpec(name="toy_mt", type="translation", format="parallel_tsv", metric="bleu", languages=["en", "de"],
                    source="en", train=str(tmp_path / "en-{lang}.tsv"), test=str(tmp_path / "en-{lang}.tsv"),
                    seeds=[0], hyperparameters=hp.model_dump())


def test_a_task_run_resumes_its_curve_and_leaves_no_checkpoint(tokenizer, tmp_path, monkeypatch, capsys):
    """Through run_task, as the evaluate stage and `metaxlm finetune` run it: the default interval writes no
    checkpoint in a short run; interrupted after step 3 and run again, the same scores, curve and reports."""
    model_dir = tiny_seq2seq(tokenizer, tmp_path / "seq2seq")
    s = spec(tmp_path)
    saved = interrupt_after(monkeypatch, 99)
    reference = run_task(s, model_dir, tmp_path / "a", scenario="supervised", tokenizer_dir=model_dir,
                         progress=False, resume_key="k")
    assert saved == []  # a run shorter than FINETUNE_CHECKPOINT_SECONDS writes none
    monkeypatch.undo()
    monkeypatch.setattr(ckpt, "FINETUNE_CHECKPOINT_SECONDS", 0.0)
    interrupt_after(monkeypatch, 3)
    with pytest.raises(Interrupted):
        run_task(s, model_dir, tmp_path / "b", scenario="supervised", tokenizer_dir=model_dir, progress=False,
                 resume_key="k")
    assert (tmp_path / "b" / "supervised-runs" / "de-seed0.ckpt" / "step_00000003").is_dir()
    # run again (still saving at every step; the wrapper does not interrupt again)
    resumed = run_task(s, model_dir, tmp_path / "b", scenario="supervised", tokenizer_dir=model_dir,
                       progress=False, resume_key="k")
    for key in ("per_language", "reports", "curve"):
        assert resumed[key] == reference[key], key
    assert resumed["curve"]["de"]["steps"] == [2, 4, 6]
    err = capsys.readouterr().err
    # the rerun says that it continues, and from where
    checkpoint = tmp_path / "b" / "supervised-runs" / "de-seed0.ckpt" / "step_00000003"
    assert f"resuming fine-tuning from step 3 (checkpoint {checkpoint})" in err
    # without a progress bar (a log), each checkpoint is a line with the step, the pace and what is left
    assert re.search(r"toy_mt de seed 0: step 4 of 6, checkpoint written; [0-9.]+ s/step, about 00:0\d to go", err)
    record = json.loads((tmp_path / "b" / "supervised-runs" / "de-seed0.json").read_text())
    assert record["detail"]["resumed_at_steps"] == [3]
    assert not (tmp_path / "b" / "supervised-runs" / "de-seed0.ckpt").exists()


def test_a_resumed_run_keeps_the_precision_it_began_in(tokenizer, tmp_path, monkeypatch, capsys):
    """Begun where `auto` picks bf16 (a CPU with fast bf16), interrupted, resumed where it picks fp32 (one
    without): the run trains and tests on in bf16 — the scores and curve of a run that never moved — and its record
    says in which precision it trained and tested."""
    from metaxlm.compute.precision import PrecisionChoice
    from metaxlm.finetune import inference

    original = inference.precision_for

    def as_on(picked: str):
        def precision_for(model, requested="auto", **kw):
            if requested != "auto":
                return original(model, requested, **kw)
            return PrecisionChoice(picked, "auto", "cpu", f"as on a CPU where {picked} is faster")
        return precision_for

    model_dir = tiny_seq2seq(tokenizer, tmp_path / "seq2seq")
    s = spec(tmp_path)
    monkeypatch.setattr(inference, "precision_for", as_on("bf16"))
    reference = run_task(s, model_dir, tmp_path / "a", scenario="supervised", tokenizer_dir=model_dir,
                         progress=False, resume_key="k")
    monkeypatch.setattr(ckpt, "FINETUNE_CHECKPOINT_SECONDS", 0.0)
    interrupt_after(monkeypatch, 3)  # after the curve's step-2 test: both parts have begun
    with pytest.raises(Interrupted):
        run_task(s, model_dir, tmp_path / "b", scenario="supervised", tokenizer_dir=model_dir, progress=False,
                 resume_key="k")
    monkeypatch.undo()
    monkeypatch.setattr(ckpt, "FINETUNE_CHECKPOINT_SECONDS", 0.0)
    monkeypatch.setattr(inference, "precision_for", as_on("fp32"))
    capsys.readouterr()
    resumed = run_task(s, model_dir, tmp_path / "b", scenario="supervised", tokenizer_dir=model_dir,
                       progress=False, resume_key="k")
    err = capsys.readouterr().err
    assert "fine-tuning's train continues in bf16, the precision it began in (here auto would choose fp32" in err
    assert "fine-tuning's test continues in bf16, the precision it began in" in err
    for key in ("per_language", "reports", "curve"):
        assert resumed[key] == reference[key], key
    for run in ("a", "b"):
        record = json.loads((tmp_path / run / "supervised-runs" / "de-seed0.json").read_text())
        assert record["detail"]["precision"] == {"train": "bf16", "test": "bf16"}
    # a run begun here, without a checkpoint to keep, is in this CPU's choice, and says so
    fresh = run_task(s, model_dir, tmp_path / "c", scenario="supervised", tokenizer_dir=model_dir, progress=False,
                     resume_key="k")
    record = json.loads((tmp_path / "c" / "supervised-runs" / "de-seed0.json").read_text())
    assert record["detail"]["precision"] == {"train": "fp32", "test": "fp32"} and "continues in" not in \
        capsys.readouterr().err
    assert fresh["curve"]["de"]["steps"] == [2, 4, 6]


def test_kept_precision_records_keeps_and_falls_back(capsys):
    """A part decided here is recorded; one the run began in is kept; one that cannot run here (fp16 begun on a
    GPU, resumed on a CPU) gives way to this machine's choice, said in one line; no record: the choice as is."""
    from metaxlm.compute.precision import PrecisionChoice
    from metaxlm.finetune.inference import kept_precision

    fp32 = PrecisionChoice("fp32", "auto", "cpu", "measured here")
    assert kept_precision(None, "train", fp32) is fp32
    fresh: dict = {}  # also what a checkpoint written before precisions were kept restores
    assert kept_precision(fresh, "train", fp32) is fp32 and fresh == {"train": "fp32"}
    began = {"train": "bf16"}
    kept = kept_precision(began, "train", fp32)
    assert kept.precision == "bf16" and kept.autocast_dtype == torch.bfloat16 and began == {"train": "bf16"}
    assert "fine-tuning's train continues in bf16" in capsys.readouterr().err
    gpu = {"test": "fp16"}
    assert kept_precision(gpu, "test", fp32) is fp32 and gpu == {"test": "fp32"}
    assert "fine-tuning's test began in fp16 on a GPU; continuing in fp32" in capsys.readouterr().err
