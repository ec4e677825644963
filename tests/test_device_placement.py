"""Every tensor on the model's device, checked without a GPU: the same code runs on a simulated accelerator
(`metaxlm.compute.devices.simulated_device`: the device reports `meta`, the data stay on the CPU) where a tensor left
on the host, or made there by an objective, meeting one on the device is a `DeviceMismatch` error — what CUDA raises.

Covered: a short pretraining through the engine of every registered objective (its preparing, labelling, forward,
backward, optimizer, after-step hooks, held-out loss, checkpoint and export), fine-tuning and batched inference,
retrieval and word alignment features, and a translation model fine-tuned and used by `metaxlm translate`'s code."""

import pytest
import torch

from metaxlm.check_gpu import CheckSettings, build_workbench, every_objective, measure_objective
from metaxlm.compute.devices import (
    SIMULATED,
    DeviceMismatch,
    SimulatedTensor,
    compute_device,
    simulated_device,
    to_device,
)

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

SETTINGS = CheckSettings(model="tiny", steps=2, batch_size=4, seq_len=32, precision="fp32", lines=300, pairs=200,
                         vocab_size=300)


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    from metaxlm.check_gpu import default_data_dir

    settings = CheckSettings(**{**SETTINGS.__dict__, "data": str(default_data_dir())})
    return build_workbench(tmp_path_factory.mktemp("device") / "bench", settings), settings


# -- the simulated device itself ---------------------------------------------------------------------------------------
def test_the_simulated_device_fails_where_a_gpu_fails_and_computes_like_the_cpu():
    torch.manual_seed(0)
    layer, x = torch.nn.Linear(4, 3), torch.randn(2, 4)
    expected = layer(x)
    with simulated_device() as device:
        assert device == SIMULATED and compute_device() == SIMULATED
        moved = layer.to(device)
        assert isinstance(moved.weight, SimulatedTensor) and moved.weight.device == device
        with pytest.raises(DeviceMismatch, match="same device"):
            moved(x)  # the input was left on the host
        out = moved(x.to(device))
        assert out.device == device and torch.equal(out.cpu(), expected.detach())  # the same numbers, read back
        out.sum().backward()
        assert moved.weight.grad.device == device
        assert float(out.sum()) == pytest.approx(float(expected.sum()))  # a host read works, as on a GPU
        made_on_the_host = torch.zeros(2, 3)
        with pytest.raises(DeviceMismatch):
            out + made_on_the_host
        assert torch.equal((out + torch.zeros(2, 3, device=out.device)).cpu(), expected.detach())
        (out * torch.tensor(2.0)).sum()  # a 0-dim CPU tensor is a scalar, as CUDA takes it
    assert compute_device().type in ("cpu", "cuda")


def test_to_device_moves_every_tensor_of_a_batch():
    from metaxlm.pretrain.objectives import Prepared

    with simulated_device() as device:
        batch = {"ids": torch.ones(2, 3, dtype=torch.long), "parts": [torch.zeros(1), (torch.ones(2), "x")], "n": 3}
        moved = to_device(batch, device)
        assert moved["ids"].device == device and moved["parts"][0].device == device
        assert moved["parts"][1][0].device == device and moved["parts"][1][1] == "x" and moved["n"] == 3
        prepared = to_device(Prepared({"labels": torch.full((2, 3), -100)}, 0, ["en", "de"]), device)
        assert isinstance(prepared, Prepared) and prepared.tensors["labels"].device == device
        assert prepared.langs == ["en", "de"]


# -- the loops on the simulated device ---------------------------------------------------------------------------------
@pytest.mark.parametrize("objective", every_objective())
def test_pretraining_keeps_every_tensor_on_the_device(objective, bench, tmp_path, monkeypatch):
    from metaxlm.pretrain import engine

    workbench, settings = bench
    seen = []
    forward = engine.ObjectiveModule.forward

    def recording(self, parts):  # the model and every input of the step's forward are on the device
        seen.append({p.device for p in self.parameters()} | {t.device for ts in parts.values() for t in ts.values()})
        return forward(self, parts)

    monkeypatch.setattr(engine.ObjectiveModule, "forward", recording)
    with simulated_device():
        measured = measure_objective(objective, workbench, settings, tmp_path / objective)
    assert measured["loss"] > 0 and measured["tokens_per_s"] > 0
    assert seen == [{SIMULATED}] * settings.steps
    from safetensors.torch import load_file

    weights = load_file(str(tmp_path / objective / "final" / ("veco/model.safetensors" if measured["arch"] == "veco"
                                                             else "model.safetensors")))
    assert all(w.device.type == "cpu" for w in weights.values())  # written from the device, read back anywhere


@pytest.fixture(scope="module")
def encoder_dir(bench, tmp_path_factory):
    """A tiny BERT exported as a run's final/ model (untrained: the placement is checked, not the quality)."""
    from metaxlm.models import arch_of, build_mlm

    workbench, settings = bench
    out = tmp_path_factory.mktemp("device-model") / "final"
    model = build_mlm(settings.model_config(), workbench.tokenizer(), seed=0)
    arch_of(model).export(model, workbench.tokenizer(), out)
    return out


def on_the_device(model) -> bool:
    return all(p.device == SIMULATED for p in model.parameters())


@pytest.mark.parametrize(("task_type", "task_dir", "fmt"), [("classification", "module", "demo_module"),
                                                             ("spans", "spans", "demo_spans")])
def test_finetuning_and_batched_inference_on_the_device(task_type, task_dir, fmt, bench, encoder_dir):
    from metaxlm.data.benchmarks import load_examples
    from metaxlm.finetune.hyperparameters import Hyperparameters
    from metaxlm.finetune.models import load_finetune_tokenizer, load_model
    from metaxlm.finetune.tasks import get_task
    from metaxlm.finetune.trainer import finetune, predict

    workbench, _ = bench
    examples = load_examples(fmt, workbench.data / "tasks" / task_dir / "train.en.jsonl.xz")
    examples = examples[::len(examples) // 12][:12]  # the files are sorted by label: their first 12 are one class
    hp = Hyperparameters(lr=1e-4, batch_size=4, eval_batch_size=5, epochs=1.0, max_seq_len=32, warmup_ratio=0.0,
                         precision="fp32")
    task = get_task(task_type)(load_finetune_tokenizer(encoder_dir), hp)
    task.fit_labels(examples)
    model = load_model(task, encoder_dir)
    history: list[float] = []
    with simulated_device():
        # a score before training moves the model to the device first: its weights must stay trainable (moved inside
        # inference mode they would be inference tensors, which a GPU's backward refuses)
        predict(model, task, examples[:2], hp)
        finetune(model, task, examples, hp, seed=0, progress=False, history=history)
        assert on_the_device(model) and len(history) == 3
        predictions = predict(model, task, examples[:7], hp)
    assert len(predictions) == 7


def test_retrieval_and_word_alignment_on_the_device(bench, encoder_dir, tmp_path):
    from metaxlm.data.benchmarks import load_examples
    from metaxlm.features.alignment import WordAligner, align_file
    from metaxlm.features.layers import load_encoder
    from metaxlm.features.retrieval import retrieval_by_layer

    workbench, _ = bench
    pairs = load_examples("parallel_tsv", workbench.data / "retrieval" / "en-de.tsv.xz")[:6]
    src, tgt = [p.source for p in pairs], [p.target for p in pairs]
    src_file, tgt_file = tmp_path / "src.txt", tmp_path / "tgt.txt"
    src_file.write_text("".join(s + "\n" for s in src), encoding="utf-8")
    tgt_file.write_text("".join(t + "\n" for t in tgt), encoding="utf-8")
    with simulated_device():
        model, tokenizer = load_encoder(encoder_dir)
        assert on_the_device(model)
        scores = retrieval_by_layer(model, tokenizer, src, tgt, batch_size=4, precision="fp32")
        assert len(scores["mean"]) == model.config.num_hidden_layers + 1
        links = WordAligner(model, tokenizer, batch_size=4, precision="fp32").align(
            [s.split() for s in src], [t.split() for t in tgt])
        assert len(links) == 6
        done = align_file(encoder_dir, src_file, tgt_file, tmp_path / "links.txt", batch_size=4, precision="fp32",
                          progress=False)  # `metaxlm align`
    assert done.pairs == 6 and (tmp_path / "links.txt").read_text().count("\n") == 6


def test_translation_finetuned_and_generated_on_the_device(bench, tmp_path):
    """The VECO model assembled as an encoder-decoder, fine-tuned, saved and used by `metaxlm translate`'s code
    (`translate_file`, beam search) — the gpu-check's translation step."""
    from metaxlm.check_gpu import measure_translation

    workbench, settings = bench
    with simulated_device():
        veco = measure_objective("veco", workbench, settings, tmp_path / "veco")
        measured = measure_translation(tmp_path / "veco" / "final" / "veco", workbench, settings, tmp_path,
                                       sentences=5)
    assert measured["sentences"] == 5 and measured["generated_tokens"] > 0 and veco["loss"] > 0
    assert (tmp_path / "translate.de.txt").read_text().count("\n") == 5


def test_a_pretraining_resumed_on_the_device_equals_the_uninterrupted_run(bench, tmp_path):
    """Weights loaded before the move, the optimizer built on the device, its state read from a host-written file
    onto it: a run resumed from its step-2 checkpoint ends with the uninterrupted run's weights, on the device."""
    from safetensors.torch import load_file

    from metaxlm.config import TrainConfig
    from metaxlm.models import build_mlm
    from metaxlm.pretrain.engine import pretrain

    workbench, settings = bench
    datasets = workbench.datasets()
    cfg = TrainConfig(steps=3, batch_size=4, seq_len=32, lr=1e-3, warmup_steps=1, precision="fp32",
                      objectives={"mlm": 1.0, "tlm": 1.0}, log_every=1, eval_every=3, eval_sequences=2,
                      save_every=1, keep_checkpoints=5)

    def train(out, **resume):
        model = build_mlm(settings.model_config(), workbench.tokenizer(), seed=0)
        with simulated_device():
            pretrain(model=model, tokenizer=workbench.tokenizer(), train_data=datasets["mono"],
                     heldout_data=datasets["heldout"], parallel_data=datasets["parallel"], train_cfg=cfg, alpha=0.7,
                     seed=0, out_dir=out, progress=False, **resume)
        return load_file(str(out / "final" / "model.safetensors"))

    whole = train(tmp_path / "whole")
    train(tmp_path / "cut")
    import shutil

    shutil.rmtree(tmp_path / "cut" / "final")
    resumed = train(tmp_path / "cut", resume_from=tmp_path / "cut" / "ckpt" / "step_00000002")
    assert whole.keys() == resumed.keys() and all(torch.equal(whole[k], resumed[k]) for k in whole)
