"""The pretraining engine: one loop for every objective, one process or many (accelerate / torchrun).

Per optimizer step:
  1. every process builds the same GLOBAL batch for each objective (packed, α-sampled) and the same
     masks (a generator seeded by the step), so the number of targets is known everywhere;
  2. the global batch is cut into `grad_accum` micro-batches, and each micro-batch into one row slice
     per process; each slice's summed loss is divided by the global target count (times the number
     of processes, since DDP averages gradients): gradients equal those of one big batch;
  3. non-finite loss stops the run before the optimizer step (the last checkpoint stays good);
  4. clip, AdamW, linear warm-up/decay; log; evaluate held-out MLM loss per language; checkpoint.

Randomness is a function of (seed, step, rank) and the saved data position, so `--resume` after a
crash (even SIGKILL) continues exactly as the uninterrupted run would have.

CPU speed (see bench/pretrain_throughput.py): the training forward runs under `compute.fastpath` (parallel dropout
masks, plain attention with an fp32 softmax, freed memory kept for reuse); AdamW is the fused kernel.
"""

from __future__ import annotations

import json
import math
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from metaxlm.compute.fastpath import reuse_freed_memory, training_fast_path
from metaxlm.config import TrainConfig
from metaxlm.errors import MetaXLMError
from metaxlm.io import atomic_write_json, atomic_write_text
from metaxlm.pretrain.batches import Batch, PackedBatches, fixed_eval_batches
from metaxlm.pretrain.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from metaxlm.pretrain.objectives import build_objective
from metaxlm.pretrain.objectives.mlm import masked_lm_loss_sum


class NonFiniteLoss(MetaXLMError):
    """The loss became NaN/inf; the run stopped before applying that step."""


@dataclass
class PretrainResult:
    out_dir: Path
    final_dir: Path
    steps: int
    heldout: dict[str, float]


def _accelerator(precision: str):
    from accelerate import Accelerator

    cpu = not torch.cuda.is_available()
    if cpu and precision == "fp16":
        raise MetaXLMError("train.precision=fp16 needs a GPU; use bf16 (CPU autocast) or fp32")
    return Accelerator(cpu=cpu, mixed_precision={"fp32": "no"}.get(precision, precision))


def _optimizer(model, cfg: TrainConfig):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:  # frozen parameters are not optimized at all
            (no_decay if p.ndim < 2 or "LayerNorm" in name else decay).append(p)
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    # the fused kernel: one pass over each parameter instead of ~10 elementwise ops (same update rule)
    fused = all(p.is_floating_point() and p.device.type in ("cpu", "cuda") for p in decay + no_decay)
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, fused=fused or None)


def _scheduler(optimizer, cfg: TrainConfig):
    from transformers import get_linear_schedule_with_warmup

    return get_linear_schedule_with_warmup(optimizer, min(cfg.warmup_steps, cfg.steps), cfg.steps)


def step_generator(seed: int, step: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed * 1_000_003 + step)


@torch.no_grad()
def heldout_loss(model, eval_rows: dict[str, torch.Tensor], objective, *, seed: int, autocast,
                 micro_batch: int = 16) -> dict[str, float]:
    """Mean MLM loss per masked token on fixed held-out sequences with fixed masks, per language."""
    was_training = model.training
    model.eval()
    out = {}
    for lang, rows in sorted(eval_rows.items()):
        gen = torch.Generator().manual_seed(seed)
        total, count = 0.0, 0
        for i in range(0, len(rows), micro_batch):
            prep = objective.prepare(Batch(rows[i:i + micro_batch], [lang] * len(rows[i:i + micro_batch])), gen)
            with autocast():
                total += float(masked_lm_loss_sum(model, prep.tensors["input_ids"], prep.tensors["labels"]))
            count += prep.num_targets
        out[lang] = total / max(count, 1)
    model.train(was_training)
    return out


def _gathered_weights(acc, module) -> dict | None:
    """Full HF weights under FSDP/DeepSpeed (collective: every process calls it); None otherwise, when
    the local model already holds them."""
    from accelerate.utils import DistributedType

    if acc.distributed_type not in (DistributedType.FSDP, DistributedType.DEEPSPEED):
        return None
    full = acc.get_state_dict(module)
    return {k.removeprefix("model."): v for k, v in full.items() if k.startswith("model.")}


class ObjectiveModule(torch.nn.Module):
    """The HF model plus the objectives' own modules, called as one module so that DDP (through
    accelerate) sees every forward: `module(name, tensors)` returns that objective's summed loss."""

    def __init__(self, model, objectives: dict):
        super().__init__()
        self.model = model
        self.heads = torch.nn.ModuleDict({k: o for k, o in objectives.items() if isinstance(o, torch.nn.Module)})
        self._objectives = objectives

    def forward(self, name: str, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
        return self._objectives[name].loss_sum(self.model, tensors)


def pretrain(*, model, tokenizer, train_data: dict, heldout_data: dict, cfg: TrainConfig, alpha: float, seed: int,
             out_dir: str | Path, resume: bool = False, progress: bool = True,
             extra_objectives: dict | None = None, parallel_data: dict | None = None) -> PretrainResult:
    """Train `model` (an HF *ForMaskedLM) on prepared data; write checkpoints, metrics and `final/`.

    Each step draws one batch per kind of data its objectives need (monolingual from `train_data`,
    parallel from `parallel_data`) and sums the objectives' losses with their configured weights.

    `extra_objectives` maps a name to (objective instance, weight) for objectives built by the caller
    (e.g. distillation from a teacher); they see the same batches as the first registered objective.
    """
    out = Path(out_dir)
    acc = _accelerator(cfg.precision)
    if acc.device.type == "cpu":
        reuse_freed_memory()
    world, rank = acc.num_processes, acc.process_index
    micro = cfg.batch_size // cfg.grad_accum
    if micro % world:
        raise MetaXLMError(f"train.batch_size/grad_accum ({micro}) must be a multiple of the process count ({world})")

    objectives = {name: build_objective(name, tokenizer, **({"mask_prob": cfg.mask_prob} if name in ("mlm", "tlm") else {}))
                  for name in cfg.objectives}
    mlm = objectives.get("mlm") or build_objective("mlm", tokenizer, mask_prob=cfg.mask_prob)
    kinds = {o.batch_kind for o in objectives.values()} | {o.batch_kind for o, _ in (extra_objectives or {}).values()}
    sources = {"mono": train_data, "parallel": parallel_data or {}}
    if not all(sources[k] for k in kinds):
        raise MetaXLMError(f"objectives {', '.join(cfg.objectives)} need {' and '.join(sorted(kinds))} data; "
                           f"the prepared data has none of kind {[k for k in kinds if not sources[k]]}")
    batches = {k: PackedBatches(sources[k], seq_len=cfg.seq_len, alpha=alpha, seed=seed, kind=k,
                                bos_id=tokenizer.cls_token_id, eos_id=tokenizer.sep_token_id) for k in sorted(kinds)}
    eval_rows = {k: fixed_eval_batches(ds, seq_len=cfg.seq_len, max_sequences=cfg.eval_sequences,
                                       bos_id=tokenizer.cls_token_id, eos_id=tokenizer.sep_token_id)
                 for k, ds in heldout_data.items()}
    eval_rows = {k: v for k, v in eval_rows.items() if len(v)}

    extra = extra_objectives or {}
    weights = {**cfg.objectives, **{k: w for k, (_, w) in extra.items()}}
    objectives.update({k: o for k, (o, _) in extra.items()})
    hf_model = model
    model = ObjectiveModule(hf_model, objectives)
    optimizer = _optimizer(model, cfg)
    scheduler = _scheduler(optimizer, cfg)
    ckpt_root = out / "ckpt"
    start = 0
    if resume:
        latest = latest_checkpoint(ckpt_root)
        if latest is None:
            raise MetaXLMError(f"--resume: no checkpoint under {ckpt_root}")
        state = load_checkpoint(latest, model=hf_model, optimizer=optimizer, scheduler=scheduler)
        for k, b in batches.items():
            b.load_state_dict(state["batches"][k])
        start = state["step"]
    model, optimizer = acc.prepare(model, optimizer)
    model.train()

    metrics_path = out / "metrics.jsonl"
    writer = None
    if acc.is_main_process:
        out.mkdir(parents=True, exist_ok=True)
        if metrics_path.exists():  # drop what came after the checkpoint we resume from
            kept = [ln for ln in metrics_path.read_text().splitlines() if json.loads(ln)["step"] <= start] if resume else []
            atomic_write_text(metrics_path, "".join(ln + "\n" for ln in kept))
        try:
            from torch.utils.tensorboard import SummaryWriter

            writer = SummaryWriter(str(out / "tb"), purge_step=start or None)
        except ImportError:  # TensorBoard is optional; JSONL is always written
            writer = None

    def log(record: dict) -> None:
        if not acc.is_main_process:
            return
        with open(metrics_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        if writer is not None:
            for k, v in record.items():
                if isinstance(v, int | float) and k != "step":
                    writer.add_scalar(k, v, record["step"])

    def evaluate(step: int) -> dict[str, float]:
        if not eval_rows:
            return {}
        losses = heldout_loss(hf_model, eval_rows, mlm, seed=seed + 12345, autocast=acc.autocast)
        log({"step": step, **{f"heldout_loss/{k}": v for k, v in losses.items()},
             "heldout_loss/mean": sum(losses.values()) / len(losses)})
        return losses

    if start == 0:
        evaluate(0)
    tokens_per_step = cfg.batch_size * cfg.seq_len * len(batches)  # one batch per kind of data
    bar = tqdm(total=cfg.steps, initial=start, desc=f"pretrain {out.name}", unit="step",
               disable=not (progress and acc.is_main_process), dynamic_ncols=True)
    last = {}
    for step in range(start + 1, cfg.steps + 1):
        t0 = time.perf_counter()
        torch.manual_seed(seed * 1_000_003 + step * 1009 + rank)  # dropout: a function of (seed, step, rank)
        gen = step_generator(seed, step)
        loss_total = torch.zeros((), dtype=torch.float64)
        step_batches = {}
        for name, weight in weights.items():
            obj = objectives[name]
            if obj.batch_kind not in step_batches:  # objectives of one kind share the step's batch
                step_batches[obj.batch_kind] = batches[obj.batch_kind].next_batch(cfg.batch_size)
            prepared = obj.prepare(step_batches[obj.batch_kind], gen)
            count = max(prepared.num_targets, 1)
            for m in range(cfg.grad_accum):
                part = prepared.rows(torch.arange(m * micro + rank, (m + 1) * micro, world))
                last_micro = m == cfg.grad_accum - 1 and name == list(weights)[-1]
                with acc.no_sync(model) if not last_micro else nullcontext(), acc.autocast(), \
                        training_fast_path(acc.device):
                    loss_sum = model(name, part.tensors)
                    acc.backward(weight * loss_sum * world / count)
                loss_total += weight * loss_sum.detach().double().cpu() / count
        loss_total = acc.reduce(loss_total.to(acc.device), reduction="sum").item() if world > 1 else loss_total.item()
        if not math.isfinite(loss_total):
            bar.close()
            good = latest_checkpoint(ckpt_root)
            raise NonFiniteLoss(f"loss is {loss_total} at step {step} (lr {scheduler.get_last_lr()[0]:.3g}); the step "
                                f"was not applied. Last good checkpoint: {good or 'none yet'}. Lower train.lr or "
                                f"check the data, then rerun with --resume.")
        grad_norm = acc.clip_grad_norm_(model.parameters(), cfg.clip)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        secs = time.perf_counter() - t0
        last = {"step": step, "loss": loss_total, "lr": scheduler.get_last_lr()[0], "grad_norm": float(grad_norm),
                "tokens_per_s": tokens_per_step / secs, "tokens": step * tokens_per_step}
        bar.set_postfix(loss=f"{loss_total:.3f}", tok_s=f"{last['tokens_per_s']:.0f}")
        bar.update()
        if step % cfg.log_every == 0 or step == cfg.steps:
            log(last)
        if step % cfg.eval_every == 0 or step == cfg.steps:
            evaluate(step)
        if step % cfg.save_every == 0 or step == cfg.steps:
            gathered = _gathered_weights(acc, model)
            if acc.is_main_process:
                save_checkpoint(ckpt_root, step, model=hf_model, weights=gathered, optimizer=optimizer.optimizer
                                if hasattr(optimizer, "optimizer") else optimizer, scheduler=scheduler,
                                state={"batches": {k: b.state_dict() for k, b in batches.items()},
                                       "tokens": step * tokens_per_step},
                                keep=cfg.keep_checkpoints)
            acc.wait_for_everyone()
    bar.close()

    final = out / "final"
    heldout = {}
    gathered = _gathered_weights(acc, model)
    if acc.is_main_process:
        from metaxlm.io import atomic_dir

        with atomic_dir(final) as tmp:
            hf_model.save_pretrained(str(tmp), state_dict=gathered)
            tokenizer.save_pretrained(str(tmp))
        heldout = heldout_loss(hf_model, eval_rows, mlm, seed=seed + 12345, autocast=acc.autocast) \
            if eval_rows else {}
        atomic_write_json(out / "summary.json", {"steps": cfg.steps, "last": last, "heldout_loss": heldout})
        if writer is not None:
            writer.close()
    acc.wait_for_everyone()
    return PretrainResult(out, final, cfg.steps, heldout)
