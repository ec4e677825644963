"""The pretraining engine: one loop for every objective, one process or many (accelerate / torchrun).

Read `pretrain()` top to bottom: set-up, then per optimizer step
  1. every process draws the same GLOBAL batch of each batch kind its objectives need (α-sampled, seeded), and each
     objective prepares it on the CPU (masks drawn from a generator seeded by the step), so random draws never
     depend on the number of processes or the device;
  2. the global batch is cut into `grad_accum` micro-batches and each micro-batch into one row slice per process,
     moved to the device (`metaxlm.compute.devices.to_device`: the only move; objectives make their own tensors on
     the device of those they are given, and the held-out loss moves its rows alike);
     objectives label their own rows (`label`: e.g. self-labelled alignments from the current weights), and the
     target counts are summed over micro-batches and processes (one all-reduce);
  3. per micro-batch, ONE forward of the wrapped module returns every objective's summed loss (so DDP sees each
     trainable parameter used once per step); the backward is Σ weight · loss_sum · processes / global count, so
     gradients equal those of one big batch however rows are split;
  4. a non-finite loss stops the run before the optimizer step (the last checkpoint stays good);
  5. clip, AdamW, linear warm-up/decay, the objectives' after-step hooks; log; evaluate; checkpoint.

New-head warm-up (`train.head_warmup_steps` = N, a run continuing a start model): for steps 1..N only the modules
the start lacked train — a freshly drawn MLM head, the objectives' own new heads, VECO's cross-attention
(`HeadWarmup`) — while the body is held: its gradients are dropped before step 5, so AdamW skips it (no
update, no weight decay, no moments). From step N+1 everything trains; the body's param groups get a linear warm-up
of their own from step N (`compute.optim.linear_schedule`) and a fresh Adam state.

Randomness is a function of (seed, step, rank) and the saved data positions and objective states, so `--resume`
after a crash (even SIGKILL) continues exactly as the uninterrupted run would have.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from metaxlm.compute.devices import to_device
from metaxlm.compute.fastpath import reuse_freed_memory, training_fast_path
from metaxlm.compute.optim import adamw, linear_schedule
from metaxlm.compute.precision import training_accelerator
from metaxlm.compute.sharding import full_model_state, full_tensors, gathered, optimizer_state, shard
from metaxlm.config import TrainConfig
from metaxlm.errors import MetaXLMError
from metaxlm.io import (
    append_line,
    atomic_dir,
    atomic_write_json,
    atomic_write_text,
    disk_full_guard,
    jsonl_lines,
)
from metaxlm.models.arch import arch_of
from metaxlm.models.checkpoint import (
    latest_checkpoint,
    load_checkpoint,
    load_optimizer_states,
    save_checkpoint,
)
from metaxlm.models.new_parameters import new_parameter_names
from metaxlm.pretrain.batches import BATCH_SOURCES, fixed_eval_batches
from metaxlm.pretrain.objectives import Objective, ObjectiveContext, build_objectives
from metaxlm.pretrain.objectives.encoding import shared_encodings
from metaxlm.pretrain.objectives.mlm import MaskedLM, heldout_mlm_loss
from metaxlm.run.layout import HELDOUT_LOSS, VariantDir, heldout_losses
from metaxlm.run.stamps import differences
from metaxlm.seeds import derive_seed


class NonFiniteLoss(MetaXLMError):
    """The loss became NaN/inf; the run stopped before applying that step."""


@dataclass
class PretrainResult:
    out_dir: Path
    final_dir: Path
    steps: int
    heldout: dict[str, float]


class ObjectiveModule(torch.nn.Module):
    """The HF model plus the objectives (and their own modules), called as one module so that DDP (through
    accelerate) sees one forward per micro-batch: `module(parts)` returns every objective's summed loss."""

    def __init__(self, model, objectives: dict[str, Objective]):
        super().__init__()
        self.model = model
        self.objectives = torch.nn.ModuleDict(objectives)

    def forward(self, parts: dict[str, dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        with shared_encodings():  # objectives given the same inputs share one encoder pass
            return {name: self.objectives[name].loss_sum(self.model, tensors) for name, tensors in parts.items()}


def input_providers(objectives: dict[str, Objective]) -> dict[str, str | None]:
    """For each objective, the objective whose prepared inputs it reads (`shares_inputs_with`), checked: the
    provider exists, reads the same batch kind and does not itself read another's."""
    names = list(objectives)
    providers = {n: o.shares_inputs_with(names) for n, o in objectives.items()}
    for name, provider in providers.items():
        if provider is None:
            continue
        if provider not in objectives or providers[provider] is not None or \
                objectives[provider].batch_kind != objectives[name].batch_kind:
            raise MetaXLMError(f"objective {name!r} reads the inputs of {provider!r}, which must be another objective "
                               f"of the run on {objectives[name].batch_kind!r} batches preparing its own inputs")
    return providers


@dataclass(frozen=True)
class HeadWarmup:
    """The new-head warm-up (`train.head_warmup_steps`), planned once from the config and what is marked new
    (`metaxlm.models.new_parameters`): which trainable parameters (names in the `ObjectiveModule`) it holds — the
    body — for how many steps, and what the run says and records about it. The optimizer gives the held ones param
    groups of their own (`adamw(held=...)`) that join with an lr warm-up of their own (`linear_schedule(held_steps=
    ...)`); the loop drops their gradients while `warming`.

    New are what the start model lacked (marked by `variant.load_start_model`: `variant.new_in_start`) and the
    objectives' own fresh heads (marked by `build_objectives`); every other trainable parameter is held. Nothing is
    held, and the run trains normally (`note` says why), when the run does not continue a start model (the model
    unmarked: every module is new, there is no body to protect) or the start lacks nothing this run trains: a
    setting shared by a config's variants must not fail the ones it does not apply to."""

    steps: int                              # train.head_warmup_steps
    held: frozenset[str] = frozenset()      # empty: nothing held, the run trains as without warm-up
    note: str | None = None                 # the line that says what trains meanwhile, or why nothing is held
    record: dict = field(default_factory=dict)  # for summary.json ({}: nothing held)

    @classmethod
    def plan(cls, module: ObjectiveModule, train_cfg: TrainConfig, *, sharded: bool = False) -> HeadWarmup:
        steps = train_cfg.head_warmup_steps
        if steps == 0:
            return cls(steps)
        off = f"head warm-up: off (train.head_warmup_steps={steps}): "
        start_lacked = new_parameter_names(module.model)
        if start_lacked is None:
            return cls(steps, note=off + "the run does not continue a start model (start_from); everything trains "
                                         "from step 1")
        trainable = {n for n, p in module.named_parameters() if p.requires_grad}
        new = trainable & ({f"model.{n}" for n in start_lacked} |
                           {f"objectives.{name}.{n}" for name, o in module.objectives.items()
                            for n in new_parameter_names(o) or ()})
        held = trainable - new
        if not new or not held:
            why = "the start model has every module this run trains" if not new else "every trainable module is new"
            return cls(steps, note=off + why + "; everything trains from step 1")
        if sharded:
            raise MetaXLMError("train.head_warmup_steps: the new-head warm-up is not supported with train.sharding="
                               "fsdp (it holds the body by dropping its gradients between backward and step, which "
                               "FSDP reduces and shards in backward): use one process or DDP (sharding: none), or "
                               "set it to 0")
        sizes = dict(module.named_parameters())
        count = {k: sum(sizes[n].numel() for n in names) for k, names in (("new", new), ("held", held))}
        modules = new_modules(new, trainable)
        whole = " (the whole run: the body never trains)" if steps >= train_cfg.steps else ""
        note = (f"head warm-up: steps 1-{steps} train only what the start lacked, {count['new']:,} parameters in "
                f"{', '.join(modules)}; the body ({count['held']:,} parameters) is held, then joins with a "
                f"{min(train_cfg.warmup_steps, train_cfg.steps)}-step lr warm-up of its own{whole}")
        return cls(steps, frozenset(held), note, {"steps": steps, "modules": modules, "new_parameters": count["new"],
                                                  "held_parameters": count["held"]})

    def warming(self, step: int) -> bool:
        """Whether `step` is one of the warm-up's: the body held."""
        return bool(self.held) and step <= self.steps

    def drop_held_gradients(self, optimizer) -> None:
        """AdamW skips a parameter without a gradient (no update, no decay, no moment): the body stays
        bit-identical, and starts a fresh Adam state when it joins."""
        for group in optimizer.param_groups:
            if group.get("held"):
                for p in group["params"]:
                    p.grad = None

    def log_fields(self, step: int, optimizer, scheduler) -> dict:
        """What a step's log line adds: the new modules' lr (`lr` is the body's) and whether the body was held."""
        if not self.held:
            return {}
        new_group = next(i for i, group in enumerate(optimizer.param_groups) if not group.get("held"))
        return {"lr/new": scheduler.get_last_lr()[new_group], **({"head_warmup": 1} if self.warming(step) else {})}


def new_modules(new: set[str], trainable: set[str]) -> list[str]:
    """The largest modules (below `model.` / `objectives.`) all of whose trainable parameters are new, naming every
    new parameter once; a layer index as * (VECO's cross-attention is one entry, not one per layer)."""
    found = set()
    for name in new:
        parts = name.split(".")
        owner = next((p for p in (".".join(parts[:k]) for k in range(2, len(parts)))
                      if all(t in new for t in trainable if t.startswith(p + "."))), name)
        found.add(re.sub(r"\.\d+(?=\.|$)", ".*", owner))
    return sorted(found)


def step_generator(seed: int, step: int) -> torch.Generator:
    return torch.Generator().manual_seed(derive_seed(seed, step))


def whole_state(training: Training) -> tuple[dict | None, dict[str, torch.Tensor]]:
    """What a checkpoint and `final/` write of the model: its weights (None: take them from the model, which holds
    them whole) and the objectives' states, whole. Collective under sharding: every process calls it; what it
    returns is complete on the main process."""
    if not (training.launch.sharded or training.launch.acc.is_main_process):
        return None, {}
    objectives_state = {f"{n}.{k}": v for n, o in training.objectives.items() for k, v in o.checkpoint_state().items()}
    weights = None
    if training.launch.sharded:
        full = full_model_state(training.optim.module)
        weights = {k.removeprefix("model."): v for k, v in full.items() if k.startswith("model.")}
        objectives_state = full_tensors(objectives_state)
    return weights, objectives_state


def check_launch(acc) -> None:
    """Refuse launches that would not train what the config says: accelerate's own FSDP / DeepSpeed wrapping (metaxlm
    shards with torch's FSDP itself: `train.sharding: fsdp`, any multi-process launch), and processes started as
    several (WORLD_SIZE) that each train alone — what accelerate's FSDP config does on a machine without GPUs."""
    from accelerate.utils import DistributedType

    if acc.distributed_type in (DistributedType.FSDP, DistributedType.DEEPSPEED):
        raise MetaXLMError(f"accelerate's distributed type {acc.distributed_type.value} is not how metaxlm shards a "
                           f"model: launch with a multi-process config (configs/accelerate/ddp-*.yaml, or torchrun) "
                           f"and set train.sharding=fsdp (torch's FSDP, docs/scale-out.md)")
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and acc.num_processes == 1:
        raise MetaXLMError(f"the launcher started {world} processes (WORLD_SIZE={world}) but they did not join one "
                           f"process group: each would train alone. Launch with torchrun or a configs/accelerate/ddp-*"
                           f".yaml config (sharding: train.sharding=fsdp)")


class RunLog:
    """metrics.jsonl (always) and TensorBoard (when installed), written by the main process only.

    A full disk while logging is a DiskFull like any other write of the run (naming the last good checkpoint). An
    append that fails midway is cut back to the last complete line, and a line left incomplete by a killed process
    is dropped on resume: readers only ever see whole JSON lines."""

    def __init__(self, layout: VariantDir, *, main: bool, start: int, resume: bool):
        self.path, self.tensorboard, self.main, self.writer = layout.metrics, layout.tensorboard, main, None
        if not main:
            return
        layout.root.mkdir(parents=True, exist_ok=True)
        if self.path.exists():  # on resume, drop what came after the checkpoint we continue from
            kept = [ln for ln in jsonl_lines(self.path) if json.loads(ln)["step"] <= start] if resume else []
            atomic_write_text(self.path, "".join(ln + "\n" for ln in kept))
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:  # TensorBoard is optional; JSONL is always written
            return
        with disk_full_guard(self.tensorboard, what="the TensorBoard log"):
            self.writer = SummaryWriter(str(self.tensorboard), purge_step=start or None)

    def __call__(self, record: dict) -> None:
        if not self.main:
            return
        append_line(self.path, json.dumps(record), what="the metrics log")
        if self.writer is not None:
            # TensorBoard writes from a thread of its own: a failed write surfaces at a later call, or at close
            with disk_full_guard(self.tensorboard, what="the TensorBoard log"):
                for k, v in record.items():
                    if isinstance(v, int | float) and k != "step":
                        self.writer.add_scalar(k, v, record["step"])

    def close(self) -> None:
        if self.writer is not None:
            with disk_full_guard(self.tensorboard, what="the TensorBoard log"):
                self.writer.close()


def last_logged(metrics: Path, step: int) -> dict:
    """The training line of `step` in metrics.jsonl ({} if none): what a run resumed at its last step reports as
    `last`, since its loop does not run."""
    if not metrics.exists():
        return {}
    records = [json.loads(ln) for ln in jsonl_lines(metrics)]
    return next((r for r in reversed(records) if r.get("step") == step and "loss" in r), {})


# Settings that only change what is logged or kept, not the weights a step produces: free to change on resume.
BOOKKEEPING_SETTINGS = frozenset({"log_every", "eval_every", "eval_sequences", "save_every", "keep_checkpoints"})


def trajectory_settings(train_cfg: TrainConfig, *, seed: int, alpha: float, made_of: dict | None = None) -> dict:
    """The settings a checkpoint's weights depend on (stored in trainer_state.json, and in summary.json once the run
    finished): resuming under others would silently mix two runs (e.g. a 600-step checkpoint "resumed" by a config
    that now says 200 steps). `made_of`: what else the caller's run is computed from
    (metaxlm.pretrain.variant.variant_settings: the model section, the variant's own settings, its vocabulary, data
    and start model)."""
    settings = {k: v for k, v in train_cfg.model_dump(mode="json").items() if k not in BOOKKEEPING_SETTINGS}
    return {"train": settings, "seed": seed, "alpha": alpha, **(made_of or {})}


# how a setting is named in a message, where its key is not the config's name for it
SETTING_NAMES = {"alpha": "data.alpha", "vocab": "vocab files", "prepared": "prepared data"}


def settings_differences(saved: dict, current: dict, *, then: str, variant: str | None = None
                         ) -> tuple[list[str], list[str]]:
    """(each setting of `current` that differs from the `saved` record, named; the settings the record predates and
    so cannot be checked). A record written before settings were grouped holds (some of) the train section, the seed
    and α only: what it holds is compared, and the rest is returned as unchecked rather than refused (the run may
    well be unchanged; there is no way to tell)."""
    if "train" not in saved:  # the flat record of older checkpoints: the train section's keys, seed, alpha
        saved = {"train": {k: v for k, v in saved.items() if k not in ("seed", "alpha")},
                 **{k: saved[k] for k in ("seed", "alpha") if k in saved}}
        current = {**current, "train": {k: v for k, v in current["train"].items() if k in saved["train"]}}
    names = {**SETTING_NAMES, **({"variant": f"variants.{variant}"} if variant else {})}
    changed = differences(saved, {k: v for k, v in current.items() if k in saved}, then=then, names=names)
    return changed, [names.get(k, k) for k in current if k not in saved]


def begun_precision(path: Path | None) -> str | None:
    """The precision the checkpoint at `path` was trained in (None: no checkpoint, or one written before
    checkpoints recorded it; an unreadable state is left to load_checkpoint, which names the damaged file)."""
    if path is None:
        return None
    try:
        return json.loads((path / "trainer_state.json").read_text(encoding="utf-8")).get("precision")
    except (OSError, ValueError):
        return None


def check_resumed_settings(path: Path, saved: dict | None, current: dict, *, variant: str | None = None) -> None:
    """Refuse to resume a checkpoint made under other settings, naming each that differs; say which settings an
    older checkpoint did not record (those are not checked)."""
    if saved is None:  # written before checkpoints recorded their settings: nothing to compare
        print(f"{path}: written before checkpoints recorded their settings: resumed unchecked", file=sys.stderr)
        return
    changed, unchecked = settings_differences(saved, current, then="in the checkpoint", variant=variant)
    if changed:
        again = f"metaxlm run ... --recompute {variant}, " if variant else ""
        raise MetaXLMError(f"{path}: this checkpoint was trained under other settings than the config's ("
                           + "; ".join(changed) + "). Resuming would mix two runs: restore those settings, or "
                           f"start the variant afresh ({again}another output_dir, or remove {path.parent.parent})")
    if unchecked:
        print(f"{path}: this checkpoint predates checkpoints recording {', '.join(unchecked)}: those cannot be "
              f"checked (the settings it recorded match)", file=sys.stderr)


@dataclass
class Launch:
    """How this process trains: its accelerator and precision, and the checkpoint it resumes from."""

    acc: Any
    precision: Any
    sharded: bool                     # train.sharding: fsdp with several processes
    checkpoint: Path | None           # None: a fresh start


@dataclass
class Inputs:
    """What the objectives are fed: a batch source per batch kind, the order they prepare their inputs in, and the
    held-out rows with the MLM objective that scores them."""

    sources: dict[str, Any]           # batch kind -> its batch source
    providers: dict[str, str | None]  # objective -> the objective whose prepared inputs it reads (None: its own)
    prepare_order: list[str]          # objectives reading another's prepared inputs come after it
    heldout_mlm: MaskedLM
    eval_rows: dict


@dataclass
class Optimization:
    """The module as it trains, its optimizer and its schedule."""

    objective_module: Any             # the objectives' module (the model and the objectives' own modules), unwrapped
    module: Any                       # ... as it trains: prepared by accelerate (DDP, ...) or sharded in place
    optimizer: Any
    scheduler: Any


@dataclass
class Position:
    """How far the run has come: the last step taken and the tokens trained on (0, 0 on a fresh start)."""

    step: int
    tokens: int


@dataclass
class Training:
    """Everything the loop touches, made once by `set_up`: the loop reads the step, the objectives and their
    inputs, the module and its optimizer, the warm-up plan, and how far the run has come (`start`, `tokens`)."""

    train_cfg: TrainConfig
    seed: int
    layout: VariantDir
    tokenizer: Any
    model: Any                        # the HF model (unwrapped)
    objectives: dict[str, Objective]
    launch: Launch
    inputs: Inputs
    optim: Optimization
    warmup: HeadWarmup
    log: RunLog
    start: int
    tokens: int
    settings: dict                    # trajectory_settings: in every checkpoint and in summary.json

    @property
    def names(self) -> list[str]:
        return list(self.objectives)


def pretrain(*, model, tokenizer, train_data: dict, heldout_data: dict, train_cfg: TrainConfig, alpha: float, seed: int,
             out_dir: str | Path, resume: bool = False, resume_from: str | Path | None = None, progress: bool = True,
             objectives: dict[str, Objective] | None = None, parallel_data: dict | None = None,
             export: Callable[..., None] | None = None, made_of: dict | None = None) -> PretrainResult:
    """Train `model` (an HF *ForMaskedLM of a registered arch) on prepared data; write checkpoints, metrics, `final/`.

    `objectives`: built objectives (default: `train_cfg.objectives` built with a context that knows only the tokenizer);
    each is fed batches of its `batch_kind` from `train_data` (monolingual) or `parallel_data` (translation pairs).
    `resume`: continue from the latest checkpoint; `resume_from`: from this checkpoint directory.
    When `model` continues a start model, the parameters the start lacked are marked new on it
    (`metaxlm.models.new_parameters`, as `variant.load_start_model` does): they train alone during the new-head
    warm-up (`train_cfg.head_warmup_steps`); an unmarked model is not a continuation.
    `export(model, tokenizer, dir, state_dict=...)` writes `final/` (default: the model's `ModelArch.export`; the
    variant module passes another to export a model trained on a trimmed vocabulary with its start's full vocabulary).
    `made_of`: what else the run is computed from, recorded beside the train settings (`trajectory_settings`) and
    compared on resume.
    """
    training = set_up(model=model, tokenizer=tokenizer, train_data=train_data, heldout_data=heldout_data,
                      train_cfg=train_cfg, alpha=alpha, seed=seed, out_dir=out_dir, resume=resume,
                      resume_from=resume_from, progress=progress, objectives=objectives, parallel_data=parallel_data,
                      made_of=made_of)
    if training.start == 0:
        evaluate(training, 0)
    bar = tqdm(total=train_cfg.steps, initial=training.start, desc=f"pretrain {training.layout.root.name}", unit="step",
               disable=not (progress and training.launch.acc.is_main_process), dynamic_ncols=True)
    last, final_losses = {}, None
    with bar:
        for step in range(training.start + 1, train_cfg.steps + 1):
            last = train_step(training, step)
            bar.set_postfix(loss=f"{last['loss']:.3f}", tok_s=f"{last['tokens_per_s']:.0f}")
            bar.update()
            if step % train_cfg.log_every == 0 or step == train_cfg.steps:
                training.log(last)
            if step % train_cfg.eval_every == 0 or step == train_cfg.steps:
                losses = evaluate(training, step)
                if step == train_cfg.steps:  # the final model's: the summary reuses them instead of a second pass
                    final_losses = losses
            if step % train_cfg.save_every == 0 or step == train_cfg.steps:
                save(training, step)
    if not last and training.start and training.launch.acc.is_main_process:
        # resumed at the last step: its logged line is last
        last = last_logged(training.layout.metrics, training.start)
    return finish(training, last, export, final_heldout=final_losses)


# -- set-up ----------------------------------------------------------------------------------------------------------
def set_up(*, model, tokenizer, train_data: dict, heldout_data: dict, train_cfg: TrainConfig, alpha: float, seed: int,
           out_dir: str | Path, resume: bool, resume_from: str | Path | None, progress: bool,
           objectives: dict[str, Objective] | None, parallel_data: dict | None,
           made_of: dict | None = None) -> Training:
    """The objectives, the accelerator and precision, the objectives' inputs, the new-head warm-up's plan, the
    state of a resumed run, the optimizer and schedule; in that order (each builder reads what came before)."""
    layout = VariantDir(Path(out_dir))
    context = ObjectiveContext(tokenizer=tokenizer, model_config=model.config, model=model,
                               mask_prob=train_cfg.mask_prob, seed=seed)
    objectives = objectives if objectives is not None else build_objectives(train_cfg.objectives, context)
    launch = launch_for(model, objectives, train_cfg, layout, resume=resume, resume_from=resume_from)
    inputs = objective_inputs(objectives, context, train_cfg, tokenizer=tokenizer, alpha=alpha, seed=seed,
                              data={"mono": train_data, "parallel": parallel_data or {}}, heldout_data=heldout_data)
    module = ObjectiveModule(model, objectives)
    warmup = HeadWarmup.plan(module, train_cfg, sharded=launch.sharded)
    settings = trajectory_settings(train_cfg, seed=seed, alpha=alpha, made_of=made_of)
    position = resumed_position(launch, model, objectives, inputs, settings, layout,
                                variant=layout.root.name if made_of else None)
    optim = optimization(module, train_cfg, launch, warmup)
    log = RunLog(layout, main=launch.acc.is_main_process, start=position.step, resume=bool(resume or resume_from))
    if launch.acc.is_main_process:
        announce(layout.root.name, train_cfg, launch, warmup, progress=progress)
    return Training(train_cfg=train_cfg, seed=seed, layout=layout, tokenizer=tokenizer, model=model,
                    objectives=objectives, launch=launch, inputs=inputs, optim=optim, warmup=warmup, log=log,
                    start=position.step, tokens=position.tokens, settings=settings)


def launch_for(model, objectives: dict[str, Objective], train_cfg: TrainConfig, layout: VariantDir, *, resume: bool,
               resume_from: str | Path | None) -> Launch:
    """The accelerator (checked: `check_launch`), the precision, whether the module is sharded, and the checkpoint
    `--resume` continues from."""
    # objectives' buffers (queues, EMA copies) are per process: DDP must not overwrite them with rank 0's. An
    # architecture's own modules (VECO's cross-attention) get no gradient from objectives that do not use them (MLM
    # in IS mode, CS weights 0), nor does the MLM head when no objective goes through it (DWA, MoCo or distillation
    # alone): DDP must be told that parameters may go unused, or it fails on the next step.
    from accelerate.utils import DistributedDataParallelKwargs

    may_go_unused = bool(arch_of(model).own_parameters(model)) or not any(o.uses_mlm_head for o in objectives.values())
    path = None
    if resume or resume_from:
        path = Path(resume_from) if resume_from else latest_checkpoint(layout.ckpt)
        if path is None:
            raise MetaXLMError(f"--resume: no checkpoint under {layout.ckpt}")
    # a resumed run continues in the precision it began in, also on a CPU where `auto` would choose another
    acc, precision = training_accelerator(
        train_cfg.precision, began_in=begun_precision(path),
        kwargs_handlers=[DistributedDataParallelKwargs(broadcast_buffers=False, find_unused_parameters=may_go_unused)])
    check_launch(acc)
    if acc.device.type == "cpu":
        reuse_freed_memory()
    micro = train_cfg.batch_size // train_cfg.grad_accum
    if micro % acc.num_processes:
        raise MetaXLMError(f"train.batch_size/grad_accum ({micro}) must be a multiple of the process count "
                           f"({acc.num_processes})")
    sharded = train_cfg.sharding == "fsdp" and acc.num_processes > 1
    if sharded and precision.precision == "fp16":
        raise MetaXLMError("train.precision fp16 with train.sharding=fsdp: the loss scaling fp16 needs is "
                           "accelerate's, which a module metaxlm shards itself does not get; use bf16 (or "
                           "sharding: none)")
    return Launch(acc=acc, precision=precision, sharded=sharded, checkpoint=path)


def objective_inputs(objectives: dict[str, Objective], context: ObjectiveContext, train_cfg: TrainConfig, *, tokenizer,
                     alpha: float, seed: int, data: dict[str, dict], heldout_data: dict) -> Inputs:
    """A batch source per batch kind the objectives read (from `data`: "mono" and "parallel"), who reads whose
    prepared inputs, and the held-out rows (fixed) with the MLM objective that scores them (the run's own, or a
    default one)."""
    providers = input_providers(objectives)
    heldout_mlm = next((o for o in objectives.values() if type(o) is MaskedLM), None) or \
        MaskedLM(MaskedLM.Options(), context)
    sources = {}
    for kind in sorted({o.batch_kind for o in objectives.values()}):
        source_cls = BATCH_SOURCES.get(kind, where="objective batch kind")
        if not data[source_cls.data]:
            needing = [n for n, o in objectives.items() if o.batch_kind == kind]
            raise MetaXLMError(f"objectives {', '.join(needing)} need {source_cls.data} data ({kind} batches); the "
                               f"prepared data has none (give data.{source_cls.data} and rerun the prepare stage)")
        sources[kind] = source_cls(data[source_cls.data], seq_len=train_cfg.seq_len, alpha=alpha, seed=seed,
                                   tokenizer=tokenizer)
    eval_rows = {k: fixed_eval_batches(ds, seq_len=train_cfg.seq_len, max_sequences=train_cfg.eval_sequences,
                                       bos_id=tokenizer.cls_token_id, eos_id=tokenizer.sep_token_id)
                 for k, ds in heldout_data.items()}
    names = list(objectives)
    prepare_order = [n for n in names if providers[n] is None] + [n for n in names if providers[n] is not None]
    return Inputs(sources=sources, providers=providers, prepare_order=prepare_order, heldout_mlm=heldout_mlm,
                  eval_rows={k: v for k, v in eval_rows.items() if len(v)})


def resumed_position(launch: Launch, model, objectives: dict[str, Objective], inputs: Inputs, settings: dict,
                     layout: VariantDir, *, variant: str | None) -> Position:
    """A resumed run's weights, objectives' states and data positions, loaded (whole, before any sharding) from
    its checkpoint once its settings are checked against the run's; where it stands. A fresh start: step 0."""
    path = launch.checkpoint
    if path is None:
        return Position(step=0, tokens=0)
    state = load_checkpoint(path, model=model, objectives=objectives)
    check_resumed_settings(path, state.get("settings"), settings, variant=variant)
    for kind, source in inputs.sources.items():
        source.load_state_dict(state["batches"][kind])
    if launch.acc.is_main_process:  # a rerun says that it continues, and from where
        print(f"resuming {layout.root.name} from step {state['step']} (checkpoint {path})", flush=True)
    return Position(step=state["step"], tokens=state.get("tokens", 0))


def optimization(module: ObjectiveModule, train_cfg: TrainConfig, launch: Launch, warmup: HeadWarmup) -> Optimization:
    """The module on the device (sharded in place, or prepared by accelerate), AdamW with the objectives' lr
    scales and the warm-up's held body in groups of their own, the linear schedule; a resumed run's states."""
    acc = launch.acc
    # on the device before the optimizer is built: it holds the parameters there, and a resumed state loads there
    if launch.sharded:  # in place: the optimizer must hold the sharded parameters
        shard(module, tuple({type(layer) for layer in arch_of(module.model).layers(module.model)}), acc.device)
    else:
        module.to(acc.device)
    optimizer = adamw(module.named_parameters(), lr=train_cfg.lr, betas=train_cfg.betas, eps=train_cfg.eps,
                      weight_decay=train_cfg.weight_decay,
                      lr_scales={f"objectives.{n}.": o.options.lr_scale for n, o in module.objectives.items()},
                      held=warmup.held)
    scheduler = linear_schedule(optimizer, min(train_cfg.warmup_steps, train_cfg.steps), train_cfg.steps,
                                held_steps=warmup.steps)
    if launch.checkpoint is not None:
        load_optimizer_states(launch.checkpoint, module=module, optimizer=optimizer, scheduler=scheduler)
    trained = module
    if not launch.sharded:
        trained, optimizer = acc.prepare(module, optimizer)
    trained.train()
    return Optimization(objective_module=module, module=trained, optimizer=optimizer, scheduler=scheduler)


def announce(variant: str, train_cfg: TrainConfig, launch: Launch, warmup: HeadWarmup, *, progress: bool) -> None:
    """The main process's lines about how the variant trains: its precision and why (training_accelerator is
    quiet), the warm-up's plan, and whether it is sharded."""
    print(f"pretrain {variant}: precision {launch.precision.precision} ({launch.precision.reason})", flush=True)
    if warmup.note:
        print(f"pretrain {variant}: {warmup.note}", flush=True)
    if progress and train_cfg.sharding == "fsdp":
        print(f"pretrain {variant}: " + (f"sharded across {launch.acc.num_processes} processes (FSDP)"
                                          if launch.sharded else "train.sharding=fsdp with one process: nothing to "
                                          "shard, the model trains whole"), flush=True)


# -- one optimizer step ----------------------------------------------------------------------------------------------
def train_step(training: Training, step: int) -> dict:
    """Steps 1-5 of the module docstring; returns the step's log record."""
    train_cfg, acc, objectives, names = training.train_cfg, training.launch.acc, training.objectives, training.names
    module, optimizer, scheduler = training.optim.module, training.optim.optimizer, training.optim.scheduler
    world, rank = acc.num_processes, acc.process_index
    micro = train_cfg.batch_size // train_cfg.grad_accum
    t0 = time.perf_counter()
    torch.manual_seed(derive_seed(training.seed, step, rank))  # dropout: a function of (seed, step, rank)
    gen = step_generator(training.seed, step)

    # 1. the global batches, prepared identically on every process
    batches = {kind: source.next_batch(train_cfg.batch_size) for kind, source in training.inputs.sources.items()}
    prepared = {}
    for name in training.inputs.prepare_order:
        objective, provider = objectives[name], training.inputs.providers[name]
        batch = batches[objective.batch_kind]
        prepared[name] = objective.prepare(batch, gen) if provider is None else \
            objective.prepare_shared(batch, gen, prepared[provider])

    # 2. this process's rows of each micro-batch, moved to the device (the one move of the step: everything the
    # objectives make from them is made there), labelled; global target counts
    micro_parts = []
    with torch.no_grad(), acc.autocast(), gathered(module):
        for m in range(train_cfg.grad_accum):
            rows = torch.arange(m * micro + rank, (m + 1) * micro, world)
            micro_parts.append({n: objectives[n].label(training.model, to_device(prepared[n].rows(rows), acc.device))
                                for n in names})
    counts = torch.tensor([sum(p[n].num_targets for p in micro_parts) for n in names], dtype=torch.float64)
    if world > 1:
        counts = acc.reduce(counts.to(acc.device), reduction="sum").cpu()
    counts = counts.clamp(min=1)

    # 3. one forward per micro-batch for all objectives; gradients of one big batch
    loss_sums = torch.zeros(len(names), dtype=torch.float64)
    for m, parts in enumerate(micro_parts):
        sync = m == train_cfg.grad_accum - 1
        with nullcontext() if sync else acc.no_sync(module), acc.autocast(), training_fast_path(acc.device):
            losses = module({n: parts[n].tensors for n in names})
            loss = None
            for i, n in enumerate(names):
                term = objectives[n].weight * losses[n] * world / float(counts[i])
                loss = term if loss is None else loss + term
            acc.backward(loss)
        loss_sums += torch.stack([losses[n].detach().double().cpu() for n in names])
    if world > 1:
        loss_sums = acc.reduce(loss_sums.to(acc.device), reduction="sum").cpu()
    per_objective = {n: float(loss_sums[i] / counts[i]) for i, n in enumerate(names)}
    loss_total = sum(objectives[n].weight * v for n, v in per_objective.items())

    # 4. a non-finite loss stops before the update
    if not math.isfinite(loss_total):
        good = latest_checkpoint(training.layout.ckpt)
        raise NonFiniteLoss(f"loss is {loss_total} at step {step} (lr {scheduler.get_last_lr()[0]:.3g}); the step "
                            f"was not applied. Last good checkpoint: {good or 'none yet'}. Lower train.lr or "
                            f"check the data, then rerun with --resume.")

    # 5. update, then the objectives' after-step hooks (EMA, queues). In the new-head warm-up the body's
    # gradients are dropped, so it stays as it is; the clipping norm is the new modules'
    if training.warmup.warming(step):
        training.warmup.drop_held_gradients(optimizer)
    grad_norm = acc.clip_grad_norm_(module.parameters(), train_cfg.clip)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    for objective in objectives.values():
        objective.after_step(training.model)

    step_tokens = sum(b.num_tokens for b in batches.values())
    training.tokens += step_tokens
    secs = time.perf_counter() - t0
    record = {"step": step, "loss": loss_total, "lr": scheduler.get_last_lr()[0], "grad_norm": float(grad_norm),
              "tokens_per_s": step_tokens / secs, "tokens": training.tokens}
    record.update(training.warmup.log_fields(step, optimizer, scheduler))
    if len(names) > 1:
        record.update({f"loss/{n}": v for n, v in per_objective.items()})
    # what the batch sources had to cut or skip (truncated pairs, empty sides), cumulative
    record.update({f"data/{kind}/{k}": v for kind, source in training.inputs.sources.items()
                   for k, v in source.stats.items()
                   if k != "rows"})
    return record


# -- evaluation, checkpoints, the final model ------------------------------------------------------------------------
def evaluate(training: Training, step: int) -> dict[str, float]:
    """The held-out MLM loss per language (fixed rows and masks) and each objective's own evaluation, logged."""
    record = {"step": step}
    with gathered(training.optim.module):
        if training.inputs.eval_rows:
            losses = heldout(training)
            record.update({f"{HELDOUT_LOSS}{k}": v for k, v in losses.items()},
                          **{f"{HELDOUT_LOSS}mean": sum(losses.values()) / len(losses)})
        for name, objective in training.objectives.items():
            scores = objective.evaluate(training.model, training.launch.acc.autocast)
            record.update({f"eval/{name}/{k}": v for k, v in scores.items()})
    if len(record) > 1:
        training.log(record)
    return heldout_losses(record)


def heldout(training: Training) -> dict[str, float]:
    """The held-out MLM loss per language: fixed rows, fixed masks (the same at every evaluation)."""
    return heldout_mlm_loss(training.model, training.inputs.eval_rows, training.inputs.heldout_mlm,
                            seed=training.seed + 12345,
                            autocast=training.launch.acc.autocast)


def save(training: Training, step: int) -> None:
    """A checkpoint of everything `--resume` needs: weights, optimizer, schedule, objectives' state, data positions."""
    launch = training.launch
    weights, objectives_state = whole_state(training)
    optimizer = optimizer_state(training.optim.objective_module, training.optim.optimizer) \
        if launch.sharded or launch.acc.is_main_process else {}
    if launch.acc.is_main_process:
        save_checkpoint(training.layout.ckpt, step, model=training.model, weights=weights, optimizer_state=optimizer,
                        scheduler=training.optim.scheduler, objectives_state=objectives_state,
                        state={"batches": {k: s.state_dict() for k, s in training.inputs.sources.items()},
                               "tokens": training.tokens, "settings": training.settings,
                               "precision": launch.precision.precision},
                        keep=training.train_cfg.keep_checkpoints)
    launch.acc.wait_for_everyone()


def finish(training: Training, last: dict, export: Callable[..., None] | None, *,
           final_heldout: dict[str, float] | None = None) -> PretrainResult:
    """`final/` (the model, its objectives' trained heads), the final held-out loss and the run's summary.
    `final_heldout`: the final model's, when this process evaluated it after the last step (else computed here)."""
    losses = final_heldout or {}
    weights, heads = whole_state(training)
    launch = training.launch
    # the main process alone, or every process when sharded (the layers gather collectively)
    if final_heldout is None and training.inputs.eval_rows and (launch.sharded or launch.acc.is_main_process):
        with gathered(training.optim.module):
            losses = heldout(training)
    if launch.acc.is_main_process:
        with atomic_dir(training.layout.final) as tmp:
            (export or arch_of(training.model).export)(training.model, training.tokenizer, tmp, state_dict=weights)
            # the objectives' own trained modules (a pointer head, a projection head) beside the HF model, so a
            # later run can continue them (e.g. `dwa: {head: <this dir>}`)
            heads = {k: v.detach().contiguous() for k, v in heads.items()}
            if heads:
                from safetensors.torch import save_file

                save_file(heads, str(Path(tmp) / "objectives.safetensors"))
        warmup = {"head_warmup": training.warmup.record} if training.warmup.record else {}
        atomic_write_json(training.layout.summary, {"steps": training.train_cfg.steps, "last": last,
                                                    "heldout_loss": losses,
                                                    "processes": launch.acc.num_processes,
                                                    "sharding": "fsdp" if launch.sharded else "none",
                                                    "precision": launch.precision.record(), **warmup,
                                                    # what the run was computed from: a rerun reuses it only unchanged
                                                    "settings": training.settings})
        training.log.close()
    launch.acc.wait_for_everyone()
    return PretrainResult(training.layout.root, training.layout.final, training.train_cfg.steps, losses)
