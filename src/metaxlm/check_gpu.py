"""`python -m metaxlm.check_gpu` (`make gpu-check`): what metaxlm does on the GPUs of this machine, measured.

With CUDA it runs, on self-contained data (English and German text of the demo bundle, data/demo; its own small
vocabulary, prepared into a work directory):

1. a short pretraining (`--steps`, default 20) of every registered objective, each alone (mlm, mlm_sides, tlm, dwa,
   moco, distill from an untrained teacher of the same size, and veco, veco_segments on the VECO architecture) in
   bf16 on one GPU, through the engine every run uses (`metaxlm.pretrain.engine.pretrain`), from a fresh model;
2. the same in DDP on all visible GPUs (`--processes`): this module started again under `python -m
   torch.distributed.run --standalone --nproc-per-node=<GPUs>`, once per objective so that a failure names its
   objective (one process per GPU, the same per-GPU batch: the global batch is GPUs times larger); then MLM and TLM
   sharded with torch's FSDP (`train.sharding=fsdp`) on the same processes;
3. MLM in fp16 with loss scaling (accelerate's GradScaler) on one GPU;
4. a fine-tuning (classification of the demo's help paragraphs, `metaxlm.finetune.trainer.finetune`) of the MLM
   run's model; the same fine-tuning with dropout, checkpointed, stopped after its first checkpoint, every random
   generator reseeded (CUDA's included) and resumed: its final weights must equal the uninterrupted run's (the CUDA
   random state in fine-tuning checkpoints); and a translation step: the VECO run's model assembled as an
   encoder-decoder, fine-tuned on en-de pairs, saved, and used by `metaxlm translate`'s code
   (`metaxlm.finetune.translate.translate_file`, beam 4);

prints tokens/s and MFU per run, and writes a JSON record (`--out`): GPU name and count, torch and CUDA versions,
the CPU model, the model's size, and per run tokens/s, MFU, seconds and the last loss — or the error of a run that
failed: the check goes on with the next one and exits 1 at the end.

The device is not a branch of this code: the engine and the fine-tuning loop put everything on the device there is
(accelerate / `metaxlm.compute.devices.compute_device()`). `--device cpu` hides the GPUs (CUDA_VISIBLE_DEVICES
empty, before torch first looks for them) and runs the very same code on a SIMULATED accelerator
(`metaxlm.compute.devices.simulated_device`): the device reports `meta`, the data stay on the CPU, and a tensor left
on the host meeting one on the device is an error, as on a GPU — so the dry run fails where a GPU run would fail
for a tensor on the wrong device (a plain CPU run cannot: everything is on the CPU there). The simulated device
runs fp32 (no autocast), one process: the DDP and FSDP runs of the dry run (`--processes 2`, gloo) are plain CPU
processes, and fp16 is skipped (a GPU's). This is what the test suite exercises on metaxlm's CPU-only CI (tiny
model, 2 steps). Without CUDA, and without `--device cpu`, it prints one line saying no CUDA device is visible and
nothing was run, and exits 0.

**FLOPs per token** (what MFU counts): 6·N + 12·L·d·T — N the model's non-embedding parameters (Kaplan et al.
2020; the word, position and type embeddings are left out, so is the MLM output layer tied to them, which the
objectives run on the masked positions only), L layers, d the hidden size, T the sequence length (`--seq-len`; the
attention term of PaLM's appendix B, forward and backward). Tokens are the batches' real (non-padding) tokens.
Forward passes an objective makes beyond the one trained pass (MoCo's momentum encoder, DWA's self-labelling pass,
the distillation teacher, VECO's cross-attention passes) are not counted: MFU is the model FLOPs the step pays for,
as usually reported, not everything the GPU computed. MFU = tokens/s · FLOPs per token / (GPUs · bf16 peak); the
peak comes from a table of dense bf16 tensor-core peaks by device name (`BF16_PEAK_TFLOPS`), or `--peak-tflops`;
an unknown device gets "unknown peak", a device without bf16 (V100, T4) says so. The first step of each run is
left out of tokens/s (kernel selection, allocator warm-up). Translation is reported as generated tokens/s (beam
search is bound by memory traffic, not FLOPs: no MFU).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

from metaxlm.roots import demo_root

# dense bf16 tensor-core peak per GPU in TFLOP/s (vendor data sheets, without sparsity), by a pattern of
# torch.cuda.get_device_name(); None: the device has no bf16 tensor cores. First match wins.
BF16_PEAK_TFLOPS: list[tuple[str, float | None]] = [
    (r"\bH100\b.*\bPCIe\b", 756.0),
    (r"\bH100\b.*\bNVL\b", 835.0),
    (r"\bH100\b", 989.0),                 # SXM (e.g. "NVIDIA H100 80GB HBM3")
    (r"\bH200\b", 989.0),
    (r"\bA100\b", 312.0),
    (r"\bL40S\b", 362.0),
    (r"\bL4\b", 121.0),
    (r"\bA10\b", 125.0),                  # not A10G, A100 (word boundaries)
    (r"\bRTX 4090\b", 165.0),
    (r"\bV100\b", None),
    (r"\bT4\b", None),
]

# the model sizes `--model` names: tiny = the tests' (tests/pretrain_helpers.py), small = the demo's
# (all-MiniLM-L6's shape), base = XLM-R base's body
MODEL_SIZES = {
    "tiny": {"layers": 2, "hidden": 32, "heads": 2, "ffn": 64, "max_positions": 128},
    "small": {"layers": 6, "hidden": 384, "heads": 12, "ffn": 1536, "max_positions": 512},
    "base": {"layers": 12, "hidden": 768, "heads": 12, "ffn": 3072, "max_positions": 512},
}
VECO_OBJECTIVES = ("veco", "veco_segments")  # need model.arch veco
LANGUAGES = ("en", "de")
PAIR = "en-de"
NO_CUDA = "metaxlm check_gpu: no CUDA device is visible; nothing was run (`--device cpu` runs the same code on the CPU)"


def default_data_dir() -> Path:
    """The demo bundle shipped in the package (the `{demo}` root)."""
    return Path(demo_root())


@dataclass
class CheckSettings:
    """Everything a check run depends on (written to the work dir, read back by the DDP workers)."""

    model: str = "base"
    steps: int = 20
    batch_size: int = 32          # sequences per device and step
    seq_len: int = 128
    precision: str = "bf16"
    objectives: list[str] = field(default_factory=list)  # empty: every registered objective
    lines: int = 20_000           # monolingual lines per language taken from the demo bundle
    pairs: int = 13_000           # en-de pairs
    vocab_size: int = 8000
    data: str = ""                # the demo bundle directory
    seed: int = 0

    def model_config(self, arch: str = "bert"):
        from metaxlm.config import ModelConfig

        return ModelConfig(**MODEL_SIZES[self.model], arch=arch)


# -- the data ----------------------------------------------------------------------------------------------------
@dataclass
class Workbench:
    """A vocabulary and prepared data (monolingual en, de; en-de pairs) made from the demo bundle, in `root`."""

    root: Path
    data: Path

    @property
    def vocab(self) -> Path:  # laid out as a run's output_dir, so the names are the run layout's
        from metaxlm.run.layout import RunDir

        return RunDir(self.root).vocab

    @property
    def prepared(self) -> Path:
        from metaxlm.run.layout import RunDir

        return RunDir(self.root).prepared

    def tokenizer(self):
        from metaxlm.vocab import load_tokenizer

        return load_tokenizer(self.vocab)

    def datasets(self) -> dict[str, dict]:
        from metaxlm.pretrain.batches import load_prepared

        return {kind: load_prepared(self.prepared, kind) for kind in ("mono", "heldout", "parallel")}


def _head(path: Path, n: int) -> list[str]:
    """The first `n` non-blank lines of a text file (.xz read as such)."""
    import lzma

    opener = lzma.open if path.suffix == ".xz" else open
    out = []
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                out.append(line.rstrip("\n"))
                if len(out) >= n:
                    break
    return out


def build_workbench(root: Path, settings: CheckSettings) -> Workbench:
    """The vocabulary and prepared data of a check, made once per data settings (a stamp file says which)."""
    from metaxlm.config import CorpusSpec, ParallelSpec, PrepareConfig, VocabConfig
    from metaxlm.data.prepare import prepare_corpora
    from metaxlm.io import atomic_write_json
    from metaxlm.vocab import train_vocab

    data = Path(settings.data) if settings.data else default_data_dir()
    bench = Workbench(Path(root), data)
    made_of = {"data": str(data.resolve()), "lines": settings.lines, "pairs": settings.pairs,
               "vocab_size": settings.vocab_size, "seed": settings.seed}
    stamp = bench.root / "workbench.json"
    if stamp.exists() and json.loads(stamp.read_text(encoding="utf-8")) == made_of:
        return bench
    corpora = bench.root / "corpora"
    corpora.mkdir(parents=True, exist_ok=True)
    mono = {}
    for lang in LANGUAGES:
        source = data / "mono" / f"{lang}.txt.xz"
        if not source.exists():
            raise SystemExit(f"metaxlm check_gpu: {source} not found (the demo bundle; give --data DIR)")
        (corpora / f"{lang}.txt").write_text("\n".join(_head(source, settings.lines)) + "\n", encoding="utf-8")
        mono[lang] = CorpusSpec(path=str(corpora / f"{lang}.txt"))
    pairs = corpora / f"{PAIR}.tsv"
    pairs.write_text("\n".join(_head(data / "parallel" / f"{PAIR}.tsv.xz", settings.pairs)) + "\n", encoding="utf-8")
    train_vocab(mono, VocabConfig(size=settings.vocab_size, sample_sentences=2 * settings.lines), bench.vocab,
                alpha=0.7, seed=settings.seed, progress=False)
    heldout = max(2, min(50, settings.lines // 20))
    prepare_corpora(mono, {PAIR: ParallelSpec(path=str(pairs))}, bench.vocab, bench.prepared,
                    PrepareConfig(num_proc=1, heldout_texts=heldout), progress=False)
    atomic_write_json(stamp, made_of)
    return bench


# -- FLOPs and peaks -----------------------------------------------------------------------------------------------
def non_embedding_parameters(model) -> int:
    """Parameters outside the embeddings (and so outside the MLM output layer tied to them)."""
    return sum(p.numel() for name, p in model.named_parameters() if "embeddings" not in name)


def flops_per_token(model, seq_len: int) -> float:
    """6·N + 12·L·d·T (see the module docstring)."""
    config = model.config
    return 6.0 * non_embedding_parameters(model) + 12.0 * config.num_hidden_layers * config.hidden_size * seq_len


def bf16_peak(device_name: str | None, given: float | None = None) -> tuple[float | None, str]:
    """(peak TFLOP/s per device or None, where it comes from / why there is none)."""
    if given:
        return given, "--peak-tflops"
    if not device_name:
        return None, "unknown peak (give --peak-tflops)"
    for pattern, peak in BF16_PEAK_TFLOPS:
        if re.search(pattern, device_name):
            if peak is None:
                return None, f"{device_name} has no bf16 tensor cores: no bf16 peak"
            return peak, f"table ({pattern.replace(chr(92) + 'b', '')})"
    return None, f"unknown peak for {device_name} (give --peak-tflops)"


def mfu(tokens_per_s: float, flops: float, devices: int, peak_tflops: float | None) -> float | None:
    if not peak_tflops or not tokens_per_s:
        return None
    return tokens_per_s * flops / (devices * peak_tflops * 1e12)


def steady_rate(records: list[dict]) -> tuple[float, float, int]:
    """(tokens/s, seconds, tokens) over the logged training steps, the first left out when there are more."""
    steps = sorted((r for r in records if "tokens_per_s" in r), key=lambda r: r["step"])
    rows, before = [], 0
    for r in steps:
        rows.append((r["tokens"] - before, (r["tokens"] - before) / r["tokens_per_s"] if r["tokens_per_s"] else 0.0))
        before = r["tokens"]
    kept = rows[1:] if len(rows) > 1 else rows
    tokens, seconds = sum(t for t, _ in kept), sum(s for _, s in kept)
    return (tokens / seconds if seconds else 0.0), seconds, tokens


# -- one pretraining run -------------------------------------------------------------------------------------------
def objective_spec(name: str, settings: CheckSettings, teacher: Path | None = None) -> dict:
    """`train.objectives` of the run that checks objective `name` alone (short queues, a teacher of the same size)."""
    if name == "moco":
        return {"moco": {"weight": 1.0, "queue_size": max(64, 16 * settings.batch_size)}}
    if name == "distill":
        return {"distill": {"weight": 1.0, "teacher": str(teacher), "language": "en"}}
    return {name: 1.0}


def every_objective() -> list[str]:
    """Every registered objective, the BERT ones first."""
    from metaxlm.pretrain.objectives import OBJECTIVES

    names = sorted(OBJECTIVES.names())
    return [n for n in names if n not in VECO_OBJECTIVES] + [n for n in names if n in VECO_OBJECTIVES]


def ensure_teacher(bench: Workbench, settings: CheckSettings) -> Path:
    """A model of the checked size (untrained, seeded) with its tokenizer: the distillation teacher."""
    from metaxlm.models import arch_of, build_mlm

    out = bench.root / f"teacher-{settings.model}"
    if not (out / "config.json").exists():
        model = build_mlm(settings.model_config(), bench.tokenizer(), seed=settings.seed + 1)
        arch_of(model).export(model, bench.tokenizer(), out)
    return out


def measure_objective(name: str, bench: Workbench, settings: CheckSettings, out_dir: Path, *,
                      peak_tflops: float | None = None, datasets: dict | None = None, sharding: str = "none",
                      precision: str | None = None) -> dict | None:
    """Pretrain objective `name` alone for `settings.steps` steps through the engine, on the device there is (every
    process of a torchrun launch calls this: a DDP run, or FSDP with `sharding="fsdp"`); the global batch is
    `settings.batch_size` per process; `precision`: instead of the settings'. Returns the measurement on the main
    process, None on the others."""
    from metaxlm.config import TrainConfig
    from metaxlm.models import build_mlm
    from metaxlm.pretrain.engine import pretrain
    from metaxlm.run.processes import is_main, world_size

    processes = world_size()
    tokenizer = bench.tokenizer()
    datasets = datasets or bench.datasets()
    arch = "veco" if name in VECO_OBJECTIVES else "bert"
    model = build_mlm(settings.model_config(arch), tokenizer, seed=settings.seed)
    teacher = ensure_teacher(bench, settings) if name == "distill" else None
    steps = settings.steps
    cfg = TrainConfig(steps=steps, batch_size=settings.batch_size * processes, seq_len=settings.seq_len, lr=1e-4,
                      warmup_steps=min(5, steps), precision=precision or settings.precision, sharding=sharding,
                      objectives=objective_spec(name, settings, teacher), log_every=1, eval_every=steps,
                      eval_sequences=4, save_every=steps, keep_checkpoints=1)
    start = time.perf_counter()
    result = pretrain(model=model, tokenizer=tokenizer, train_data=datasets["mono"],
                      heldout_data=datasets["heldout"], parallel_data=datasets["parallel"], train_cfg=cfg,
                      alpha=0.7, seed=settings.seed, out_dir=out_dir, progress=False)
    wall = time.perf_counter() - start
    if not is_main():
        return None
    summary = json.loads((Path(result.out_dir) / "summary.json").read_text(encoding="utf-8"))
    records = [json.loads(line) for line in (Path(result.out_dir) / "metrics.jsonl").read_text().splitlines()
               if line.strip()]
    rate, seconds, tokens = steady_rate(records)
    flops = flops_per_token(model, settings.seq_len)
    last = summary.get("last") or {}
    return {"objective": name, "arch": arch, "processes": processes, "device": _device_kind(),
            "steps": steps, "batch_size": cfg.batch_size, "tokens_per_s": rate, "timed_steps": max(1, steps - 1),
            "timed_seconds": seconds, "timed_tokens": tokens, "wall_seconds": wall,
            "flops_per_token": flops, "non_embedding_params": non_embedding_parameters(model),
            "mfu": mfu(rate, flops, processes, peak_tflops), "loss": last.get("loss"),
            "precision": summary.get("precision", {}).get("precision"), "sharding": summary.get("sharding"),
            "final": str(result.final_dir)}


def _device_kind() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


# -- fine-tuning and translation ---------------------------------------------------------------------------------
class _StepClock:
    """Tokens and times per fine-tuning step: the task's loss counts each batch's real tokens (source and target),
    `on_step` stamps the time; tokens/s over the steps after the first."""

    def __init__(self, task):
        self.tokens: list[int] = []
        self.stamps: list[float] = [time.perf_counter()]
        loss = task.loss

        def counted(model, batch):
            n = int(batch["attention_mask"].sum())
            if "labels" in batch and batch["labels"].dim() == 2:  # translation: the target's tokens too
                n += int((batch["labels"] != -100).sum())
            self.tokens.append(n)
            return loss(model, batch)

        task.loss = counted

    def on_step(self, step: int, total: int) -> None:
        self.stamps.append(time.perf_counter())

    def rate(self) -> tuple[float, int]:
        times = [b - a for a, b in zip(self.stamps, self.stamps[1:], strict=False)]
        kept = list(zip(self.tokens, times, strict=False))
        kept = kept[1:] if len(kept) > 1 else kept
        seconds = sum(t for _, t in kept)
        return (sum(n for n, _ in kept) / seconds if seconds else 0.0), len(self.tokens)


def module_examples(bench: Workbench, n: int) -> list:
    """`n` English training examples of the demo module task, spread evenly over its file: the file is sorted by
    label, so its first `n` would all be of one class."""
    from metaxlm.data.benchmarks import load_examples

    examples = load_examples("demo_module", bench.data / "tasks" / "module" / "train.en.jsonl.xz")
    return examples[::max(1, len(examples) // n)][:n]


def measure_finetune(model_dir: Path, bench: Workbench, settings: CheckSettings, *,
                     peak_tflops: float | None = None) -> dict:
    """One epoch of classification fine-tuning (demo module task, English) of the encoder in `model_dir`, about
    `settings.steps` steps of `settings.batch_size` paragraphs."""
    from metaxlm.finetune.hyperparameters import Hyperparameters
    from metaxlm.finetune.models import load_finetune_tokenizer, load_model
    from metaxlm.finetune.tasks import get_task
    from metaxlm.finetune.trainer import finetune, set_seed

    examples = module_examples(bench, settings.steps * settings.batch_size)
    hp = Hyperparameters(lr=1e-4, batch_size=settings.batch_size, epochs=1.0, max_seq_len=settings.seq_len,
                         warmup_ratio=0.0, precision=settings.precision)
    task = get_task("classification")(load_finetune_tokenizer(model_dir), hp)
    task.fit_labels(examples)
    set_seed(settings.seed)
    model = load_model(task, model_dir)
    clock = _StepClock(task)
    history: list[float] = []
    start = time.perf_counter()
    finetune(model, task, examples, hp, seed=settings.seed, progress=False, history=history, on_step=clock.on_step)
    rate, steps = clock.rate()
    flops = flops_per_token(model, settings.seq_len)
    return {"task": "demo_module classification", "device": _device_kind(), "steps": steps, "examples": len(examples),
            "tokens_per_s": rate, "wall_seconds": time.perf_counter() - start, "flops_per_token": flops,
            "mfu": mfu(rate, flops, 1, peak_tflops), "loss": history[-1] if history else None}


class _Stopped(Exception):
    """Raised from a fine-tuning's step hook: the run stops there, as a kill would leave it (its last checkpoint)."""


def measure_finetune_resume(model_dir: Path, bench: Workbench, settings: CheckSettings, work: Path) -> dict:
    """The classification fine-tuning with dropout and a checkpoint after every step, run once whole and once stopped
    after half its steps, every random generator reseeded (CUDA's too) and resumed from its checkpoint: the resumed
    run's final weights must equal the uninterrupted run's (within 1e-5: a GPU's atomics-based kernels need not be
    bit-exact); an error otherwise."""
    import random

    import numpy as np
    import torch

    from metaxlm.finetune.checkpoint import Checkpoints
    from metaxlm.finetune.hyperparameters import Hyperparameters
    from metaxlm.finetune.models import load_finetune_tokenizer, load_model
    from metaxlm.finetune.tasks import get_task
    from metaxlm.finetune.trainer import finetune, set_seed

    steps = max(4, settings.steps)
    examples = module_examples(bench, steps * settings.batch_size)
    hp = Hyperparameters(lr=1e-4, batch_size=settings.batch_size, max_steps=steps, max_seq_len=settings.seq_len,
                         warmup_ratio=0.0, dropout=0.1, precision=settings.precision if settings.precision != "fp16"
                         else "bf16")
    stop_at = steps // 2

    def run(directory: Path, stop: bool) -> dict:
        task = get_task("classification")(load_finetune_tokenizer(model_dir), hp)
        task.fit_labels(examples)
        set_seed(settings.seed)
        model = load_model(task, model_dir)
        checkpoints = Checkpoints(directory, key="gpu-check", every_seconds=0.0)

        def on_step(step: int, total: int) -> None:
            if stop and step == stop_at:
                raise _Stopped

        finetune(model, task, examples, hp, seed=settings.seed, progress=False, checkpoints=checkpoints,
                 on_step=on_step)
        return {k: v.detach().float().cpu() for k, v in model.state_dict().items()}

    from torch.nn.attention import SDPBackend, sdpa_kernel

    # deterministic kernels (the math attention, cuBLAS's fixed workspace set by main), so that a difference is the
    # resume's and not a GPU's atomics: an unrestored dropout state moves weights by about lr, like such noise
    deterministic = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        with sdpa_kernel(SDPBackend.MATH):
            whole = run(work / "finetune-whole", stop=False)
            try:
                run(work / "finetune-resumed", stop=True)
                raise RuntimeError("the fine-tuning meant to stop ran to its end")
            except _Stopped:
                pass
            random.seed(12345)  # what a new process would have: nothing of the stopped run's generators
            np.random.seed(12345)
            torch.manual_seed(12345)
            if torch.cuda.is_available():
                torch.cuda.manual_seed_all(12345)
            resumed = run(work / "finetune-resumed", stop=False)
    finally:
        torch.use_deterministic_algorithms(deterministic)
    largest = max(float((whole[k] - resumed[k]).abs().max()) for k in whole)
    if largest > 1e-5:
        raise RuntimeError(f"the fine-tuning stopped at step {stop_at} and resumed ends {largest:.3g} away from the "
                           f"uninterrupted run (largest weight difference): a random state is not restored")
    return {"device": _device_kind(), "steps": steps, "stopped_at": stop_at, "largest_difference": largest,
            "tensors": len(whole)}


def measure_translation(veco_dir: Path, bench: Workbench, settings: CheckSettings, work: Path, *,
                        sentences: int | None = None) -> dict:
    """The VECO model in `veco_dir` assembled as an encoder-decoder, fine-tuned one epoch on en-de pairs (about
    `settings.steps` steps), saved, then `metaxlm translate`'s code on held-out English sentences (beam 4)."""
    from metaxlm.data.benchmarks import load_examples
    from metaxlm.finetune.hyperparameters import Hyperparameters
    from metaxlm.finetune.models import load_finetune_tokenizer, special_token
    from metaxlm.finetune.tasks import get_task
    from metaxlm.finetune.trainer import finetune, set_seed
    from metaxlm.finetune.translate import translate_file
    from metaxlm.models.seq2seq import save_seq2seq
    from metaxlm.models.veco_export import assemble_seq2seq

    n = settings.steps * settings.batch_size
    pairs = load_examples("parallel_tsv", bench.data / "parallel" / f"{PAIR}.tsv.xz")[:n]
    hp = Hyperparameters(lr=1e-4, batch_size=settings.batch_size, epochs=1.0, max_seq_len=min(64, settings.seq_len),
                         warmup_ratio=0.0, precision=settings.precision)
    tokenizer = load_finetune_tokenizer(veco_dir)
    task = get_task("translation")(tokenizer, hp)
    set_seed(settings.seed)
    layers = MODEL_SIZES[settings.model]["layers"]
    model = assemble_seq2seq(veco_dir, tokenizer=tokenizer, decoder_layers=max(1, layers // 2), init="veco",
                             seed=settings.seed)
    task.decoder_start_token_id = special_token(model, "decoder_start_token_id")
    clock = _StepClock(task)
    history: list[float] = []
    start = time.perf_counter()
    finetune(model, task, pairs, hp, seed=settings.seed, progress=False, history=history, on_step=clock.on_step,
             desc="fine-tune translation")
    train_rate, steps = clock.rate()
    train_seconds = time.perf_counter() - start
    model_dir = save_seq2seq(model.cpu(), tokenizer, work / "translation-model")
    held_out = load_examples("parallel_tsv", bench.data / "retrieval" / f"{PAIR}.tsv.xz")
    source = work / "translate.en.txt"
    source.write_text("".join(ex.source.replace("\n", " ") + "\n"
                              for ex in held_out[:sentences or 4 * settings.batch_size]), encoding="utf-8")
    stats = translate_file(model_dir, source, work / "translate.de.txt", num_beams=4, batch_size=settings.batch_size,
                           max_new_tokens=32, progress=False)
    return {"device": _device_kind(), "finetune_steps": steps, "finetune_tokens_per_s": train_rate,
            "finetune_seconds": train_seconds, "finetune_loss": history[-1] if history else None,
            "sentences": stats["sentences"], "generated_tokens": stats["tokens"], "beam": 4,
            "translate_seconds": stats["seconds"],
            "generated_tokens_per_s": stats["tokens"] / stats["seconds"] if stats["seconds"] else 0.0,
            "sentences_per_s": stats["sentences"] / stats["seconds"] if stats["seconds"] else 0.0}


# -- DDP ------------------------------------------------------------------------------------------------------------
def error_line(text: str) -> str:
    """The line that says what went wrong in a failed run's output: the first exception a process raised (its
    rank's prefix dropped; not the launcher's ChildFailedError), else the last line."""
    lines = [re.sub(r"^\[rank\d+\]:\s*", "", ln).strip() for ln in text.splitlines() if ln.strip()]
    found = [ln for ln in lines if re.match(r"^[\w.]+(Error|Exception|Interrupt|Exit)\b.*:", ln)
             and "ChildFailedError" not in ln]
    return (found[:1] or lines[-1:] or ["no output"])[0][:500]


def ddp_run_name(name: str, sharding: str) -> str:
    """The name of a multi-process run's files under ddp/: the objective's, `-fsdp` when sharded."""
    return name if sharding == "none" else f"{name}-{sharding}"


def run_ddp(work: Path, name: str, processes: int, *, sharding: str = "none") -> dict:
    """Objective `name` pretrained by this module's DDP worker (`--ddp-worker`) in `processes` processes under
    torch.distributed.run (one launch per objective, so a failure names its objective), replicated (DDP) or sharded
    (`sharding="fsdp"`): its measurement, written by rank 0, or the error."""
    import subprocess

    run_name = ddp_run_name(name, sharding)
    log = work / "ddp" / f"{run_name}.log"
    result = work / "ddp" / f"{run_name}.json"
    log.parent.mkdir(parents=True, exist_ok=True)
    result.unlink(missing_ok=True)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}",
               "-m", "metaxlm.check_gpu", "--ddp-worker", str(work), "--objectives", name, "--sharding", sharding]
    with open(log, "w", encoding="utf-8") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0 or not result.exists():
        return {"objective": name, "processes": processes, "log": str(log),
                "error": f"exit status {done.returncode}: "
                         f"{error_line(log.read_text(encoding='utf-8', errors='replace'))}"}
    return json.loads(result.read_text(encoding="utf-8"))


def ddp_worker(work: Path, name: str, sharding: str = "none") -> int:
    """One process of the DDP (or FSDP) check of objective `name`; rank 0 writes its measurement
    (ddp/<name>[-fsdp].json)."""
    from metaxlm.io import atomic_write_json
    from metaxlm.run.processes import quiet_other_ranks

    quiet_other_ranks()
    settings = CheckSettings(**json.loads((work / "settings.json").read_text(encoding="utf-8")))
    peak = json.loads((work / "peak.json").read_text(encoding="utf-8"))["peak_tflops"]
    bench = build_workbench(work / "bench", settings)  # made by the parent: read only
    run_name = ddp_run_name(name, sharding)
    measured = measure_objective(name, bench, settings, work / "ddp" / run_name, peak_tflops=peak, sharding=sharding)
    if measured is not None:
        atomic_write_json(work / "ddp" / f"{run_name}.json", measured)
    return 0


def measure_or_error(name: str, measure) -> dict:
    """`measure()`, or the error it raised (the check goes on with the next run and exits 1 at the end)."""
    try:
        return measure()
    except Exception as err:  # noqa: BLE001 -- a check reports every failure, not only the first
        return {"objective": name, "error": f"{type(err).__name__}: {err}".splitlines()[0][:500]}


# -- the whole check -------------------------------------------------------------------------------------------------
# the objectives the FSDP step shards: one reading monolingual text, one translation pairs
FSDP_OBJECTIVES = ("mlm", "tlm")


def run_check(settings: CheckSettings, work: Path, *, ddp_processes: int, peak_tflops: float | None = None,
              finetuning: bool = True, simulate: bool = False) -> dict:
    """Steps 1-4 of the module docstring on the device there is; returns the JSON record. `simulate`: the
    one-process runs on the simulated accelerator (`--device cpu`)."""
    import gc
    from contextlib import nullcontext

    import torch

    import metaxlm
    from metaxlm.compute.devices import simulated_device
    from metaxlm.io import atomic_write_json
    from metaxlm.run.info import cpu_model

    def on_device(measure):  # a one-process run, on the simulated accelerator in a dry run
        def run():
            with simulated_device() if simulate else nullcontext():
                return measure()
        return run

    cuda = torch.cuda.is_available()
    gpu = torch.cuda.get_device_name(0) if cuda else None
    peak, peak_source = bf16_peak(gpu, peak_tflops)
    names = settings.objectives or every_objective()
    work.mkdir(parents=True, exist_ok=True)
    bench = build_workbench(work / "bench", settings)
    atomic_write_json(work / "settings.json", asdict(settings))
    atomic_write_json(work / "peak.json", {"peak_tflops": peak})
    datasets = bench.datasets()
    record: dict = {
        "check": "metaxlm gpu check", "when": time.strftime("%Y-%m-%d %H:%M:%S"),
        "device": "cuda" if cuda else "cpu", "gpu": gpu, "gpus": torch.cuda.device_count() if cuda else 0,
        "torch": torch.__version__, "cuda": torch.version.cuda, "metaxlm": metaxlm.__version__, "cpu": cpu_model(),
        "precision": settings.precision, "bf16_peak_tflops": peak, "peak_source": peak_source,
        "flops_per_token": "6*N_non_embedding + 12*layers*hidden*seq_len (see metaxlm.check_gpu)",
        "settings": asdict(settings), "model": {**MODEL_SIZES[settings.model], "size": settings.model},
        "device_check": "simulated accelerator: a host tensor meeting a device tensor is an error" if simulate else
        "cuda" if cuda else "cpu",
        "single": {}, "ddp": {}, "fsdp": {}, "fp16": None, "finetune": None, "finetune_resume": None,
        "translation": None,
    }
    for name in names:
        record["single"][name] = measure_or_error(name, on_device(lambda name=name: measure_objective(
            name, bench, settings, work / "single" / name, peak_tflops=peak, datasets=datasets)))
    done = {n: r for n, r in record["single"].items() if "error" not in r}
    record["model"]["non_embedding_params"] = next(iter(done.values()))["non_embedding_params"] if done else None
    if finetuning:
        bert = next((r["final"] for r in done.values() if r["arch"] == "bert"), None)
        veco = next((r["final"] for r in done.values() if r["arch"] == "veco"), None)
        no_bert = {"skipped": "no BERT objective was pretrained (--objectives)"}
        record["finetune"] = measure_or_error("finetune", on_device(lambda: measure_finetune(
            Path(bert), bench, settings, peak_tflops=peak))) if bert else no_bert
        record["finetune_resume"] = measure_or_error("finetune_resume", on_device(lambda: measure_finetune_resume(
            Path(bert), bench, settings, work))) if bert else no_bert
        record["translation"] = measure_or_error("translation", on_device(lambda: measure_translation(
            Path(veco) / "veco", bench, settings, work))) if veco else \
            {"skipped": "no VECO objective was pretrained (--objectives)"}
    record["fp16"] = measure_or_error("fp16", lambda: measure_objective(
        "mlm", bench, settings, work / "fp16" / "mlm", peak_tflops=peak, datasets=datasets, precision="fp16")) \
        if cuda else {"skipped": "fp16 needs a GPU (CPU autocast has no fp16 loss scaling)"}
    if ddp_processes > 1:
        if "distill" in names:  # made here: the worker processes only read it
            ensure_teacher(bench, settings)
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()  # the GPU memory this process cached, for the workers
        record["ddp"] = {"processes": ddp_processes,
                         "objectives": {name: run_ddp(work, name, ddp_processes) for name in names}}
        record["fsdp"] = {"processes": ddp_processes,
                          "objectives": {name: run_ddp(work, name, ddp_processes, sharding="fsdp")
                                         for name in FSDP_OBJECTIVES if name in names}}
    else:
        why = "one GPU visible: DDP and FSDP need two or more" if cuda else "CPU dry run without --processes N"
        record["ddp"], record["fsdp"] = {"skipped": why}, {"skipped": why}
    return record


def failures(record: dict) -> list[str]:
    """What failed in a check record, one line each."""
    runs = [(f"pretrain {n}", r) for n, r in record["single"].items()]
    runs += [(f"pretrain {n} (DDP)", r) for n, r in (record["ddp"].get("objectives") or {}).items()]
    runs += [(f"pretrain {n} (FSDP)", r) for n, r in (record.get("fsdp", {}).get("objectives") or {}).items()]
    runs += [(k, record[k]) for k in ("fp16", "finetune", "finetune_resume", "translation") if record.get(k)]
    return [f"{what}: {r['error']}" for what, r in runs if "error" in r]


def _rate(value: float | None) -> str:
    return f"{value:,.0f}" if value else "-"


def _mfu(value: float | None, peak_source: str) -> str:
    if value is None:
        return "no bf16 peak" if "no bf16" in peak_source else "unknown peak"
    return f"{100 * value:.1f}%"


def summary_lines(record: dict) -> list[str]:
    """The table printed at the end."""
    where = f"{record['gpu']} x {record['gpus']}" if record["gpu"] else \
        f"CPU dry run on a simulated accelerator ({record['cpu']})"
    peak = f"{record['bf16_peak_tflops']:g} TFLOP/s per device ({record['peak_source']})" \
        if record["bf16_peak_tflops"] else record["peak_source"]
    model = record["model"]
    lines = [f"metaxlm gpu check: {where}; torch {record['torch']}; {record['precision']}; bf16 peak: {peak}",
             f"model {model['size']}: {model['layers']} layers x {model['hidden']}, "
             f"{model.get('non_embedding_params') or 0:,} non-embedding parameters; "
             f"seq_len {record['settings']['seq_len']}, batch {record['settings']['batch_size']} per device",
             f"{'run':<28}{'processes':>10}{'tokens/s':>14}{'MFU':>14}"]
    src = record["peak_source"]

    def row(what: str, r: dict, processes: int = 1) -> str:
        if "error" in r:
            return f"{what:<28}{processes:>10}{'FAILED':>14}   {r['error'][:120]}"
        return f"{what:<28}{processes:>10}{_rate(r['tokens_per_s']):>14}{_mfu(r['mfu'], src):>14}"

    for name, r in record["single"].items():
        lines.append(row(f"pretrain {name}", r))
    ddp = record["ddp"]
    for name, r in (ddp.get("objectives") or {}).items():
        lines.append(row(f"pretrain {name} (DDP)", r, ddp["processes"]))
    if "skipped" in ddp:
        lines.append(f"DDP: skipped ({ddp['skipped']})")
    fsdp = record.get("fsdp") or {}
    for name, r in (fsdp.get("objectives") or {}).items():
        lines.append(row(f"pretrain {name} (FSDP)", r, fsdp["processes"]))
    if "skipped" in fsdp:
        lines.append(f"FSDP: skipped ({fsdp['skipped']})")
    fp16 = record.get("fp16") or {}
    if "skipped" in fp16:
        lines.append(f"fp16: skipped ({fp16['skipped']})")
    elif fp16:
        lines.append(row("pretrain mlm (fp16)", fp16))
    resume = record.get("finetune_resume") or {}
    if "skipped" in resume:
        lines.append(f"fine-tuning resume: skipped ({resume['skipped']})")
    elif "error" in resume:
        lines.append(row("fine-tuning resume", resume))
    elif resume:
        lines.append(f"fine-tuning resume: stopped at step {resume['stopped_at']} of {resume['steps']}, resumed: "
                     f"final weights equal the uninterrupted run's (largest difference "
                     f"{resume['largest_difference']:.2g})")
    ft, tr = record.get("finetune"), record.get("translation")
    for what, r in (("fine-tune (classification)", ft), ("translation", tr)):
        if r and "skipped" in r:
            lines.append(f"{what}: skipped ({r['skipped']})")
        elif r and "error" in r:
            lines.append(row(what, r))
    if ft and "tokens_per_s" in ft:
        lines.append(row("fine-tune (classification)", ft))
    if tr and "generated_tokens_per_s" in tr:
        lines.append(f"{'fine-tune (translation)':<28}{1:>10}{_rate(tr['finetune_tokens_per_s']):>14}{'-':>14}")
        lines.append(f"{'translate (beam 4)':<28}{1:>10}{_rate(tr['generated_tokens_per_s']):>14}"
                     f"{'n/a':>14}   generated tokens/s, {tr['sentences_per_s']:.1f} sentences/s")
    return lines


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m metaxlm.check_gpu", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, help="the JSON record (default: none written)")
    p.add_argument("--steps", type=int, default=20, help="pretraining steps per objective (default 20)")
    p.add_argument("--model", choices=sorted(MODEL_SIZES), default="base", help="model size (default base: 12 x 768)")
    p.add_argument("--batch-size", type=int, default=32, help="sequences per device and step (default 32)")
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--objectives", help="comma-separated objectives (default: every registered one)")
    p.add_argument("--processes", type=int,
                   help="DDP processes (default: every visible GPU; the CPU dry run: none unless given)")
    p.add_argument("--peak-tflops", type=float, help="bf16 peak per device, for a device the table lacks")
    p.add_argument("--precision", choices=("bf16", "fp32"),
                   help="of the pretraining and fine-tuning runs (default: bf16 on a GPU; the CPU dry run: fp32)")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                   help="cpu: a dry run of the same code on the CPU (the GPUs hidden)")
    p.add_argument("--work", type=Path, help="work directory (default: a temporary one, removed at the end)")
    p.add_argument("--data", type=Path, help="the demo bundle (default: the one shipped in the package)")
    p.add_argument("--lines", type=int, default=20_000, help="monolingual lines per language from the bundle")
    p.add_argument("--pairs", type=int, default=13_000, help="en-de pairs from the bundle")
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--no-finetune", action="store_true", help="skip the fine-tuning and translation steps")
    p.add_argument("--ddp-worker", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--sharding", choices=("none", "fsdp"), default="none", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def cuda_visible() -> bool:
    """Whether torch sees a CUDA device (torch's own warnings about a driver without a device kept quiet)."""
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.cuda.is_available()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS (the fine-tuning resume check)
    if args.ddp_worker is not None:
        return ddp_worker(args.ddp_worker, args.objectives, args.sharding)
    if args.device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # before torch looks: the engine then finds the CPU
        if args.precision not in (None, "fp32"):
            raise SystemExit("metaxlm check_gpu: --device cpu runs on the simulated accelerator, in fp32 only")
    elif not cuda_visible():
        print(NO_CUDA, flush=True)
        return 0
    import shutil
    import tempfile

    import torch
    from transformers.utils import logging as hf_logging

    from metaxlm.io import atomic_write_json

    hf_logging.disable_progress_bar()  # "Writing model shards" at every save: the table is the output

    cuda = torch.cuda.is_available()
    objectives = [n.strip() for n in (args.objectives or "").split(",") if n.strip()]
    if objectives:
        known = every_objective()
        unknown = [n for n in objectives if n not in known]
        if unknown:
            raise SystemExit(f"metaxlm check_gpu: unknown objectives {', '.join(unknown)} (known: {', '.join(known)})")
    precision = args.precision or ("fp32" if args.device == "cpu" else "bf16")
    settings = CheckSettings(model=args.model, steps=args.steps, batch_size=args.batch_size, seq_len=args.seq_len,
                             precision=precision, objectives=objectives, lines=args.lines, pairs=args.pairs,
                             vocab_size=args.vocab_size,
                             data=str(args.data or default_data_dir()))
    processes = args.processes if args.processes is not None else (torch.cuda.device_count() if cuda else 0)
    work = args.work or Path(tempfile.mkdtemp(prefix="metaxlm-gpu-check-"))
    try:
        record = run_check(settings, work, ddp_processes=processes, peak_tflops=args.peak_tflops,
                           finetuning=not args.no_finetune, simulate=args.device == "cpu")
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    print("\n".join(summary_lines(record)), flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(args.out, record)
        print(f"JSON record: {args.out}")
    failed = failures(record)
    for line in failed:
        print(f"FAILED {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
