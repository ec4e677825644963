"""Pretraining throughput: metaxlm's engine vs a plain Hugging Face baseline, side by side in one run.

Both sides train the same model (same config, same initial weights) on the same batches with the same
masks and the same hyperparameters, each in its own child process (so peak RSS is per side):

* metaxlm: `metaxlm.pretrain.engine.pretrain` — output layer only at masked positions, packed sequences,
  the CPU fast path (metaxlm.compute.fastpath);
* baseline: `BertForMaskedLM(input_ids, labels=...)` (full-vocabulary logits), torch AdamW with the same
  parameter groups, clipping and warm-up/decay schedule, in a plain loop.

Precision: each side runs in its best precision on this CPU. With `--precision auto` (the default) the
parent process decides once with `metaxlm.compute.precision.resolve_precision` (a short bf16-vs-fp32 matmul
measurement at the model's shapes) and both sides get that choice, bf16 autocast or plain fp32: the baseline
is measured the same way as metaxlm, so neither side is held to a precision that is slow on this CPU.
`--precision` / `--baseline-precision` force one.

The sides alternate (`--repeats` runs of each, in the order M B B M ...), since the machine may be shared;
each side is reported by its fastest run, with every run's tokens/s and the CPU share other processes took.

The batches of both come from metaxlm's `mono` batch source + `MaskedLM.prepare` with the engine's seeds
(a digest of every training batch and mask is compared between the two sides). Tokens/s is measured
over the steps after the warm-up steps, each step timed from batch building to the optimizer step.
After equal steps both models are evaluated in fp32 with full logits on the same held-out packed
sequences with the same masks (MLM loss and accuracy).

Data: a 32k shared vocabulary trained on the demo bundle's monolingual text (data/demo/mono) and the
prepared Arrow data, cached under .cache/bench-pretrain/ so reruns are fast. The machine's bf16 and
fp32 matmul peaks are measured at start; MFU is reported against the larger of the two (the best this CPU
does), and against each.
Writes runs/bench/pretrain_throughput.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SEED = 0
ALPHA = 0.7

FLOPS_FORMULA = (
    "training FLOPs per token = 6*N_enc + 6*N_head*f + 12*L*T*d, where N_enc = parameters of the encoder "
    "layers, N_head = parameters of the MLM head (transform dense+LayerNorm, and the output layer d*V+V; "
    "weights and biases), embeddings excluded (lookups), L layers, T sequence length, d hidden size (the "
    "attention term: QK^T and AV, 2*T*d FLOPs each per token and layer forward, x3 for forward+backward); "
    "f = fraction of positions at which the head runs: 1 for full logits (the 'useful' full-logit-equivalent "
    "count, and the baseline's executed count); for metaxlm's executed count the measured masked fraction, "
    "masked rows padded to a multiple of 64 as the engine runs them. MFU 'useful' credits metaxlm with the "
    "full-vocabulary logits it never computes, so it can approach or exceed what the hardware executes"
)


# -- data ------------------------------------------------------------------------------------------------
def prepare_data(cache: Path, *, vocab_size: int, sample_sentences: int, heldout_texts: int,
                 langs: list[str] | None) -> Path:
    """Vocabulary + prepared Arrow data for the demo corpus, cached by their settings."""
    from metaxlm.config import CorpusSpec, PrepareConfig, VocabConfig
    from metaxlm.data.prepare import prepare_corpora
    from metaxlm.vocab import train_vocab

    files = sorted((REPO / "data" / "demo" / "mono").glob("*.txt.xz"))
    corpora = {p.name.split(".")[0]: CorpusSpec(path=str(p)) for p in files}
    if langs:
        corpora = {k: v for k, v in corpora.items() if k in langs}
    key = f"v{vocab_size}-s{sample_sentences}-h{heldout_texts}-{'_'.join(sorted(corpora))}"
    root = cache / key
    if not (root / "vocab" / "vocab_stats.json").exists():
        print(f"training a {vocab_size} vocabulary on {len(corpora)} demo languages -> {root / 'vocab'}", flush=True)
        root.mkdir(parents=True, exist_ok=True)
        train_vocab(corpora, VocabConfig(size=vocab_size, sample_sentences=sample_sentences), root / "vocab",
                    alpha=ALPHA, seed=SEED, progress=False)
    if not (root / "prepared" / "meta.json").exists():
        print(f"preparing Arrow data -> {root / 'prepared'}", flush=True)
        prepare_corpora(corpora, {}, root / "vocab", root / "prepared",
                        PrepareConfig(num_proc=2, heldout_texts=heldout_texts), progress=False)
    return root


def load_side_inputs(args):
    from metaxlm.config import ModelConfig, TrainConfig
    from metaxlm.pretrain.batches import load_prepared
    from metaxlm.vocab import load_tokenizer

    data = Path(args.data)
    tok = load_tokenizer(data / "vocab")
    train = load_prepared(data / "prepared", "mono")
    heldout = load_prepared(data / "prepared", "heldout")
    mcfg = ModelConfig(layers=args.layers, hidden=args.hidden, heads=args.heads, ffn=args.ffn,
                       max_positions=max(512, args.seq_len))
    tcfg = TrainConfig(steps=args.warmup + args.steps, batch_size=args.batch_size, seq_len=args.seq_len, lr=args.lr,
                       warmup_steps=args.lr_warmup, precision=args.side_precision, log_every=1,
                       eval_every=10**9, save_every=10**9)
    return tok, train, heldout, mcfg, tcfg


class Digest:
    """Digest of every training batch (inputs and labels) a side trained on, plus target counts."""

    def __init__(self):
        self.h, self.targets = hashlib.sha256(), []

    def add(self, prepared) -> None:
        for k in ("input_ids", "labels"):
            self.h.update(prepared.tensors[k].numpy().tobytes())
        self.targets.append(prepared.num_targets)


# -- held-out evaluation (identical for both sides) --------------------------------------------------------
def evaluate(model, tok, heldout: dict, *, seq_len: int, sequences: int, mask_prob: float) -> dict:
    """fp32, full logits: MLM loss and accuracy over the masked positions of fixed held-out sequences
    with fixed masks (the same for every model evaluated)."""
    import torch
    import torch.nn.functional as F

    from metaxlm.pretrain.batches import Batch, fixed_eval_batches
    from metaxlm.pretrain.objectives import ObjectiveContext
    from metaxlm.pretrain.objectives.mlm import MaskedLM

    mlm = MaskedLM(MaskedLM.Options(mask_prob=mask_prob), ObjectiveContext(tokenizer=tok))
    model.eval()
    per_lang, loss_sum, correct, count = {}, 0.0, 0, 0
    h = hashlib.sha256()
    with torch.no_grad():
        for lang, ds in sorted(heldout.items()):
            rows = fixed_eval_batches(ds, seq_len=seq_len, max_sequences=sequences, bos_id=tok.cls_token_id,
                                      eos_id=tok.sep_token_id)
            if not len(rows):
                continue
            gen = torch.Generator().manual_seed(SEED + 12345)
            l_sum = l_correct = l_count = 0
            for i in range(0, len(rows), 16):
                prep = mlm.prepare(Batch("mono", [lang] * len(rows[i:i + 16]), {"input_ids": rows[i:i + 16]}), gen)
                ids, labels = prep.tensors["input_ids"], prep.tensors["labels"]
                h.update(ids.numpy().tobytes())
                h.update(labels.numpy().tobytes())
                logits = model(input_ids=ids).logits.float()
                where = labels != -100
                l_sum += float(F.cross_entropy(logits[where], labels[where], reduction="sum"))
                l_correct += int((logits[where].argmax(-1) == labels[where]).sum())
                l_count += int(where.sum())
            per_lang[lang] = {"loss": l_sum / max(l_count, 1), "accuracy": l_correct / max(l_count, 1),
                              "masked_tokens": l_count, "sequences": len(rows)}
            loss_sum, correct, count = loss_sum + l_sum, correct + l_correct, count + l_count
    return {"loss": loss_sum / max(count, 1), "accuracy": correct / max(count, 1), "masked_tokens": count,
            "sequences": sum(v["sequences"] for v in per_lang.values()), "per_language": per_lang,
            "eval_set_digest": h.hexdigest()[:16]}


# -- the two sides (each runs in its own child process) ----------------------------------------------------
def run_metaxlm(args) -> dict:
    import torch

    from metaxlm.models import build_mlm
    from metaxlm.pretrain.engine import pretrain
    from metaxlm.pretrain.objectives.mlm import MaskedLM

    tok, train, heldout, mcfg, tcfg = load_side_inputs(args)
    model = build_mlm(mcfg, tok, seed=SEED)
    digest = Digest()
    real_prepare = MaskedLM.prepare

    def recording_prepare(self, batch, generator):  # the engine's own batches, recorded for the comparison
        out = real_prepare(self, batch, generator)
        digest.add(out)
        return out

    MaskedLM.prepare = recording_prepare
    with tempfile.TemporaryDirectory() as out:
        # no held-out data for the engine: the held-out evaluation below is the same fp32 one for both sides
        pretrain(model=model, tokenizer=tok, train_data=train, heldout_data={}, train_cfg=tcfg, alpha=ALPHA, seed=SEED,
                 out_dir=out, progress=False)
        rows = [json.loads(ln) for ln in (Path(out) / "metrics.jsonl").read_text().splitlines()]
    MaskedLM.prepare = real_prepare
    rss_training = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    tokens_per_step = tcfg.batch_size * tcfg.seq_len
    steps = [r for r in rows if "loss" in r]
    secs = [tokens_per_step / r["tokens_per_s"] for r in steps]  # the engine times each step itself
    return {"step_seconds": secs, "losses": [r["loss"] for r in steps], "digest": digest.h.hexdigest()[:16],
            "targets": digest.targets, "threads": torch.get_num_threads(), "peak_rss_mb_training": rss_training,
            "eval": evaluate(model, tok, heldout, seq_len=args.seq_len, sequences=args.eval_sequences,
                             mask_prob=tcfg.mask_prob)}


def run_baseline(args) -> dict:
    import torch
    from transformers import get_linear_schedule_with_warmup

    from metaxlm.models import build_mlm
    from metaxlm.pretrain.batches import BATCH_SOURCES
    from metaxlm.pretrain.engine import step_generator
    from metaxlm.pretrain.objectives import ObjectiveContext
    from metaxlm.pretrain.objectives.mlm import MaskedLM

    tok, train, heldout, mcfg, tcfg = load_side_inputs(args)
    model = build_mlm(mcfg, tok, seed=SEED)
    model.train()
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim < 2 or "LayerNorm" in name else decay).append(p)
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": tcfg.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=tcfg.lr, betas=tcfg.betas, eps=tcfg.eps)
    scheduler = get_linear_schedule_with_warmup(optimizer, min(tcfg.warmup_steps, tcfg.steps), tcfg.steps)
    batches = BATCH_SOURCES.get("mono")(train, seq_len=tcfg.seq_len, alpha=ALPHA, seed=SEED, tokenizer=tok)
    mlm = MaskedLM(MaskedLM.Options(mask_prob=tcfg.mask_prob), ObjectiveContext(tokenizer=tok))
    digest, secs, losses = Digest(), [], []
    for step in range(1, tcfg.steps + 1):
        t0 = time.perf_counter()
        torch.manual_seed(SEED * 1_000_003 + step * 1009)  # dropout seeded as the engine does
        prep = mlm.prepare(batches.next_batch(tcfg.batch_size), step_generator(SEED, step))
        digest.add(prep)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.side_precision == "bf16"):
            loss = model(input_ids=prep.tensors["input_ids"], labels=prep.tensors["labels"]).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), tcfg.clip)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        secs.append(time.perf_counter() - t0)
        losses.append(loss.item())
    return {"step_seconds": secs, "losses": losses, "digest": digest.h.hexdigest()[:16], "targets": digest.targets,
            "threads": torch.get_num_threads(),
            "peak_rss_mb_training": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "eval": evaluate(model, tok, heldout, seq_len=args.seq_len, sequences=args.eval_sequences,
                             mask_prob=tcfg.mask_prob)}


def child_main(args) -> None:
    import torch

    torch.set_num_threads(args.threads)
    t = time.perf_counter()
    result = (run_metaxlm if args.child == "metaxlm" else run_baseline)(args)
    result["wall_seconds"] = time.perf_counter() - t
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps(result), flush=True)


def _cpu_busy_seconds() -> tuple[float, float]:
    """(busy, steal) CPU-seconds of the whole machine since boot, from /proc/stat (0, 0 where unavailable)."""
    try:
        f = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return 0.0, 0.0
    tick = os.sysconf("SC_CLK_TCK")
    busy = f[0] + f[1] + f[2] + f[5] + f[6]  # user nice system irq softirq
    return busy / tick, (f[7] if len(f) > 7 else 0) / tick


def run_child(side: str, argv: list[str]) -> dict:
    """Run one side in a fresh process; also measure how much CPU other processes used meanwhile (the
    timings are only meaningful on an otherwise idle machine)."""
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    busy0, steal0 = _cpu_busy_seconds()
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--child", side, *argv], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy1, steal1 = _cpu_busy_seconds()
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-5000:] + proc.stderr[-5000:])
        raise SystemExit(f"{side} run failed (exit {proc.returncode})")
    result = json.loads(next(ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("RESULT "))[7:])
    own = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    cpus = len(os.sched_getaffinity(0))
    result["other_processes_cpu_share"] = max(0.0, (busy1 - busy0) - own) / (wall * cpus)
    result["steal_cpu_share"] = (steal1 - steal0) / (wall * cpus)
    return result


# -- machine peak and FLOPs --------------------------------------------------------------------------------
def matmul_peak(dtype_name: str, threads: int, n: int = 2048, reps: int = 20, trials: int = 3) -> float:
    """Best-of-`trials` GFLOP/s of an n×n @ n×n matmul repeated `reps` times on `threads` threads."""
    import torch

    torch.set_num_threads(threads)
    dtype = getattr(torch, dtype_name)
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    for _ in range(3):
        a @ b
    best = 0.0
    for _ in range(trials):
        t = time.perf_counter()
        for _ in range(reps):
            a @ b
        best = max(best, 2 * n**3 * reps / (time.perf_counter() - t) / 1e9)
    return best


def model_counts(args, vocab: int) -> dict:
    """Parameter counts of the benchmarked model (built on the meta device: no memory, no time)."""
    import torch
    from transformers import BertConfig, BertForMaskedLM

    with torch.device("meta"):
        m = BertForMaskedLM(BertConfig(vocab_size=vocab, hidden_size=args.hidden, num_hidden_layers=args.layers,
                                       num_attention_heads=args.heads, intermediate_size=args.ffn,
                                       max_position_embeddings=max(512, args.seq_len), tie_word_embeddings=True))
    return {"total": sum(p.numel() for p in m.parameters()),  # the decoder weight is tied to the embeddings
            "encoder": sum(p.numel() for p in m.bert.encoder.parameters()),
            "head": sum(p.numel() for p in m.cls.predictions.transform.parameters()) + args.hidden * vocab + vocab,
            "embeddings": sum(p.numel() for p in m.bert.embeddings.parameters())}


def flops_per_token(counts: dict, args, head_fraction: float) -> float:
    return 6 * counts["encoder"] + 6 * counts["head"] * head_fraction + 12 * args.layers * args.seq_len * args.hidden


# -- main ------------------------------------------------------------------------------------------------
def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--hidden", type=int, default=384)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--ffn", type=int, default=1536)
    ap.add_argument("--vocab-size", type=int, default=32000, help="requested sentencepiece vocabulary size")
    ap.add_argument("--sample-sentences", type=int, default=200_000, help="texts sampled to train the vocabulary")
    ap.add_argument("--langs", default="", help="comma-separated demo languages (default: all 12)")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=32, help="sequences per step")
    ap.add_argument("--warmup", type=int, default=5, help="untimed warm-up steps")
    ap.add_argument("--steps", type=int, default=30, help="timed steps (after the warm-up steps)")
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--lr-warmup", type=int, default=5, help="learning-rate warm-up steps (then linear decay)")
    ap.add_argument("--eval-sequences", type=int, default=16, help="held-out sequences per language")
    ap.add_argument("--heldout-texts", type=int, default=300, help="texts per language held out when preparing")
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--precision", choices=["auto", "bf16", "fp32"], default="auto",
                    help="metaxlm's precision (auto: bf16 only where its matmuls are faster on this CPU)")
    ap.add_argument("--baseline-precision", choices=["auto", "bf16", "fp32"],
                    help="the baseline's precision (default: as --precision, decided the same way)")
    ap.add_argument("--repeats", type=int, default=2, help="runs of each side, alternating (M B B M ...)")
    ap.add_argument("--cache", default=str(REPO / ".cache" / "bench-pretrain"))
    ap.add_argument("--out", default=str(REPO / "runs" / "bench" / "pretrain_throughput.json"))
    ap.add_argument("--child", choices=["metaxlm", "baseline"], help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--side-precision", choices=["bf16", "fp32"], default="fp32", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def summarize(side: dict, warmup: int, tokens_per_step: int) -> dict:
    timed = side["step_seconds"][warmup:]
    median = statistics.median(timed)
    return {"tokens_per_s": tokens_per_step * len(timed) / sum(timed),
            "tokens_per_s_median_step": tokens_per_step / median, "median_step_seconds": median,
            "timed_steps": len(timed), "step_seconds": [round(x, 4) for x in side["step_seconds"]],
            "peak_rss_mb_training": side["peak_rss_mb_training"],
            "peak_rss_mb_incl_eval": side["peak_rss_mb"], "first_step_loss": side["losses"][0],
            "last_step_loss": side["losses"][-1], "wall_seconds_child": side["wall_seconds"],
            "other_processes_cpu_share": side["other_processes_cpu_share"],
            "steal_cpu_share": side["steal_cpu_share"], "torch_threads": side["threads"]}


def main() -> None:
    from metaxlm.pretrain.objectives.mlm import ROWS_MULTIPLE

    args = parse_args()
    if args.child:
        child_main(args)
        return
    langs = [x for x in args.langs.split(",") if x] or None
    t_data = time.perf_counter()
    data = prepare_data(Path(args.cache), vocab_size=args.vocab_size, sample_sentences=args.sample_sentences,
                        heldout_texts=args.heldout_texts, langs=langs)
    t_data = time.perf_counter() - t_data
    vocab_stats = json.loads((data / "vocab" / "vocab_stats.json").read_text())
    meta = json.loads((data / "prepared" / "meta.json").read_text())
    vocab = vocab_stats["vocab_size"]

    import torch

    from metaxlm.compute.precision import DECISION_SHAPES, cpu_model, resolve_precision

    torch.set_num_threads(args.threads)  # the children's thread count, for the precision measurement
    # measured now (not from the cache file of an earlier run), once for both sides
    choice = resolve_precision(args.precision, "cpu", announce=False, cache_file=None)
    base_choice = resolve_precision(args.baseline_precision or args.precision, "cpu", announce=False,
                                    cache_file=None)
    print(f"precision: metaxlm {choice.precision} ({choice.reason}); baseline {base_choice.precision}"
          f"{'' if base_choice.precision == choice.precision else f' ({base_choice.reason})'}", flush=True)
    bf16_peak = matmul_peak("bfloat16", args.threads)
    fp32_peak = matmul_peak("float32", args.threads)
    best_peak = max(bf16_peak, fp32_peak)
    print(f"matmul peak on {args.threads} threads: bf16 {bf16_peak:.0f} GFLOP/s, fp32 {fp32_peak:.0f} GFLOP/s",
          flush=True)

    argv = [a for a in sys.argv[1:]] + ["--data", str(data)]
    tokens_per_step = args.batch_size * args.seq_len
    runs: dict[str, list[dict]] = {"metaxlm": [], "baseline": []}
    for r in range(args.repeats):
        for side in ("metaxlm", "baseline") if r % 2 == 0 else ("baseline", "metaxlm"):
            precision = (choice if side == "metaxlm" else base_choice).precision
            print(f"{side} ({precision}), run {r + 1} of {args.repeats} ...", flush=True)
            result = run_child(side, [*argv, "--side-precision", precision])
            runs[side].append(result)
            print(f"  {summarize(result, args.warmup, tokens_per_step)['tokens_per_s']:.0f} tokens/s, other processes "
                  f"used {result['other_processes_cpu_share']:.0%} of the CPUs", flush=True)

    def fastest(side: str) -> dict:
        return max(runs[side], key=lambda res: summarize(res, args.warmup, tokens_per_step)["tokens_per_s"])

    ours, base = fastest("metaxlm"), fastest("baseline")

    counts = model_counts(args, vocab)
    timed_targets = ours["targets"][args.warmup:]
    masked_fraction = sum(timed_targets) / (tokens_per_step * len(timed_targets))
    # the engine runs the head on the masked rows padded to a multiple of ROWS_MULTIPLE (one call per step here)
    head_fraction = sum(-(-t // ROWS_MULTIPLE) * ROWS_MULTIPLE for t in timed_targets) / \
        (tokens_per_step * len(timed_targets))
    useful = flops_per_token(counts, args, 1.0)
    executed_ours = flops_per_token(counts, args, head_fraction)
    s_ours, s_base = summarize(ours, args.warmup, tokens_per_step), summarize(base, args.warmup, tokens_per_step)

    def mfu(tok_s: float, flops: float) -> dict:
        return {"achieved_gflop_s": tok_s * flops / 1e9, "vs_best_peak": tok_s * flops / 1e9 / best_peak,
                "vs_bf16_peak": tok_s * flops / 1e9 / bf16_peak, "vs_fp32_peak": tok_s * flops / 1e9 / fp32_peak}

    s_ours["mfu_useful_full_logit_equivalent"] = mfu(s_ours["tokens_per_s"], useful)
    s_ours["mfu_executed"] = mfu(s_ours["tokens_per_s"], executed_ours)
    s_base["mfu_useful_full_logit_equivalent"] = s_base["mfu_executed"] = mfu(s_base["tokens_per_s"], useful)
    for summary, side, side_choice in ((s_ours, "metaxlm", choice), (s_base, "baseline", base_choice)):
        summary["precision"] = side_choice.precision
        summary["precision_reason"] = side_choice.reason
        summary["runs_tokens_per_s"] = [summarize(res, args.warmup, tokens_per_step)["tokens_per_s"]
                                        for res in runs[side]]
        summary["runs_other_processes_cpu_share"] = [res["other_processes_cpu_share"] for res in runs[side]]
    s_ours["setup"] = (f"metaxlm.pretrain.engine.pretrain: {choice.precision}, masked-only output layer, packed "
                       "sequences, CPU fast path")
    s_base["setup"] = (f"BertForMaskedLM(input_ids, labels=...): full-vocabulary logits, {base_choice.precision}"
                       f"{' autocast' if base_choice.precision == 'bf16' else ''}, torch.optim.AdamW (default "
                       "implementation), same parameter groups, clipping, schedule, batches and masks")
    ev_o, ev_b = ours["eval"], base["eval"]
    speedup = s_ours["tokens_per_s"] / s_base["tokens_per_s"]
    contention = max(s_ours["other_processes_cpu_share"], s_base["other_processes_cpu_share"])
    mfu_executed = s_ours["mfu_executed"]["vs_best_peak"]
    import transformers

    report = {
        "benchmark": "pretrain_throughput",
        "speedup_tokens_per_s": speedup,
        "speedup_tokens_per_s_median_step": s_ours["tokens_per_s_median_step"] / s_base["tokens_per_s_median_step"],
        "target_speedup": 2.0, "target_executed_mfu_vs_best_peak": 0.5,
        "executed_mfu_vs_best_peak": mfu_executed,
        "target_met": speedup >= 2.0 and mfu_executed >= 0.5,
        "warning": None if contention < 0.05 else
        f"other processes used up to {contention:.0%} of the CPUs during a timed run: the timings are disturbed",
        "model": {"layers": args.layers, "hidden": args.hidden, "heads": args.heads, "ffn": args.ffn,
                  "vocab_size": vocab, "vocab_size_requested": args.vocab_size,
                  "vocab_note": "sentencepiece pieces + <pad> and <mask> (XLM-R layout)" if vocab >= args.vocab_size
                  else f"the demo corpus supports only {vocab} ids (sentencepiece, hard_vocab_limit=False), "
                  f"fewer than the requested {args.vocab_size}",
                  "parameters": counts},
        "precision": {"metaxlm": choice.precision, "baseline": base_choice.precision,
                      "requested": {"metaxlm": args.precision, "baseline": args.baseline_precision or args.precision},
                      "reason": {"metaxlm": choice.reason, "baseline": base_choice.reason}},
        "repeats": args.repeats, "reported_run": "the fastest of each side's runs (the least disturbed)",
        "training": {"seq_len": args.seq_len, "batch_size": args.batch_size, "tokens_per_step": tokens_per_step,
                     "warmup_steps_untimed": args.warmup, "timed_steps": args.steps, "lr": args.lr,
                     "lr_warmup_steps": args.lr_warmup, "mask_prob": 0.15, "alpha": ALPHA, "seed": SEED,
                     "masked_fraction_timed": masked_fraction,
                     "metaxlm_head_rows_fraction_timed": head_fraction},
        "data": {"cache": str(data), "languages": sorted(meta["mono"]),
                 "train_tokens": sum(v["tokens"] for v in meta["mono"].values()),
                 "vocab_sample_sentences": args.sample_sentences, "prep_seconds_this_run": t_data},
        "same_batches_and_masks": ours["digest"] == base["digest"] and ours["targets"] == base["targets"],
        "machine": {"cpus": len(os.sched_getaffinity(0)), "threads": args.threads, "cpu": cpu_model(),
                    "bf16_matmul_peak_gflop_s": bf16_peak, "fp32_matmul_peak_gflop_s": fp32_peak,
                    "best_matmul_peak_gflop_s": best_peak,
                    "precision_measurement_gflop_s": choice.gflops or base_choice.gflops,
                    "precision_measurement_shapes": [list(x) for x in DECISION_SHAPES],
                    "peak_method": "best of 3 x (20 x 2048x2048 @ 2048x2048), after 3 warm-up matmuls",
                    "torch": torch.__version__, "transformers": transformers.__version__},
        "flops": {"formula": FLOPS_FORMULA, "useful_per_token_full_logit": useful,
                  "executed_per_token_metaxlm": executed_ours, "executed_per_token_baseline": useful},
        "metaxlm": s_ours,
        "baseline": s_base,
        "heldout_after_equal_steps": {
            "steps": args.warmup + args.steps, "precision": "fp32, full logits, both sides",
            "masked_tokens": ev_o["masked_tokens"], "sequences": ev_o["sequences"],
            "same_eval_set": ev_o["eval_set_digest"] == ev_b["eval_set_digest"],
            "metaxlm": {"loss": ev_o["loss"], "accuracy": ev_o["accuracy"]},
            "baseline": {"loss": ev_b["loss"], "accuracy": ev_b["accuracy"]},
            "accuracy_difference_metaxlm_minus_baseline": ev_o["accuracy"] - ev_b["accuracy"],
            "loss_difference_metaxlm_minus_baseline": ev_o["loss"] - ev_b["loss"],
            "per_language": {k: {"metaxlm": ev_o["per_language"][k], "baseline": ev_b["per_language"][k]}
                             for k in ev_o["per_language"]},
        },
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    ho = report["heldout_after_equal_steps"]
    for name, side in (("metaxlm", s_ours), ("baseline", s_base)):
        print(f"{name:9s} {side['tokens_per_s']:8.0f} tokens/s (median step {side['tokens_per_s_median_step']:.0f})  "
              f"[{side['precision']}] peak RSS {side['peak_rss_mb_training']:.0f} MB  MFU vs best peak: useful "
              f"{side['mfu_useful_full_logit_equivalent']['vs_best_peak']:.1%}, executed "
              f"{side['mfu_executed']['vs_best_peak']:.1%}  held-out loss {ho[name]['loss']:.4f} "
              f"accuracy {ho[name]['accuracy']:.4f}")
    print(f"speed-up {speedup:.2f}x, executed MFU {mfu_executed:.1%} of the best peak (targets 2x and 50%: "
          f"{'met' if report['target_met'] else 'NOT met'}); same batches and "
          f"masks: {report['same_batches_and_masks']}; {report['warning'] or 'no contention from other processes'}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
