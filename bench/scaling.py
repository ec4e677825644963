"""Scaling on this machine: pretraining tokens/s of the bench model (bench/pretrain_throughput.py's, 6 x 384, 32k
vocabulary) in 1 process, and in 2 processes with DDP and with FSDP (`train.sharding=fsdp`), each launched as a user
would (torchrun), in one run; plus each method's communication volume per optimizer step, computed from its
parameter counts (not measured: on one machine the "network" is memory).

Each configuration runs the real engine (`metaxlm.pretrain.engine.pretrain`) for `--warmup` + `--steps` steps on
the demo bundle's text (the vocabulary and Arrow data of bench/pretrain_throughput.py, cached); tokens/s is the
median of the timed steps' own rates (the engine times each step). 1 process uses every core; with 2 processes
each gets one thread (torchrun's default), so the 2-process rows show what the parallel split costs or saves on the
same two cores, not more hardware.

Communication per optimizer step and process, fp32 values (4 bytes), N processes, (N-1)/N the share a ring sends:
  DDP   one all-reduce of the gradients per step: 2 (N-1)/N * P_t * 4, P_t the trainable parameters.
  FSDP  per micro-batch (`grad_accum` of them; metaxlm does not defer FSDP's gradient reduction): an all-gather of
        the root group (embeddings, MLM head, objectives' heads: P_root) and of each layer the forward calls (P_f;
        VECO's CS pass calls every layer a second time),
        the layers again in backward (they reshard after their forward; the root does not), a reduce-scatter of the
        gradients (P_t); objectives that label with the model outside its forward (DWA's alignments, MoCo's keys)
        gather the root again and the layers they call (P_lab): (N-1)/N * 4 * (P_root + 2 P_f + P_t + [P_root + P_lab]).
Counted for paper-size models (12 x 768, XLM-R's 250,002-row vocabulary) of each method's objectives.

Writes runs/bench/scaling.json (with the CPU model); docs/scaling.md explains the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
from pretrain_throughput import ALPHA, SEED, prepare_data  # noqa: E402  (the same data and model as that bench)

CONFIGS = [  # name, processes, sharding
    ("1 process", 1, "none"),
    ("DDP, 2 processes", 2, "none"),
    ("FSDP, 2 processes", 2, "fsdp"),
]
PAPER_SIZE = {"layers": 12, "hidden": 768, "heads": 12, "ffn": 3072, "vocab": 250_002}
BYTES = 4  # fp32 gradients and parameters on the wire


# -- one configuration (a worker under torchrun, or alone) -----------------------------------------------------------
def worker(args) -> None:
    import torch

    from metaxlm.config import ModelConfig, TrainConfig
    from metaxlm.models import build_mlm
    from metaxlm.pretrain.batches import load_prepared
    from metaxlm.pretrain.engine import pretrain
    from metaxlm.vocab import load_tokenizer

    data = Path(args.data)
    tok = load_tokenizer(data / "vocab")
    model = build_mlm(ModelConfig(layers=args.layers, hidden=args.hidden, heads=args.heads, ffn=args.ffn,
                                  max_positions=max(512, args.seq_len)), tok, seed=SEED)
    cfg = TrainConfig(steps=args.warmup + args.steps, batch_size=args.batch_size, seq_len=args.seq_len,
                      warmup_steps=2, precision=args.precision, sharding=args.sharding, log_every=1,
                      eval_every=10**9, save_every=10**9)
    out = Path(args.out_dir)
    pretrain(model=model, tokenizer=tok, train_data=load_prepared(data / "prepared", "mono"), heldout_data={},
             train_cfg=cfg, alpha=ALPHA, seed=SEED, out_dir=out, progress=False)
    if int(os.environ.get("RANK", "0")) == 0:
        rows = [json.loads(ln) for ln in (out / "metrics.jsonl").read_text().splitlines()]
        rates = [r["tokens_per_s"] for r in rows if "loss" in r][args.warmup:]
        summary = json.loads((out / "summary.json").read_text())
        (out / "measured.json").write_text(json.dumps({
            "tokens_per_s": statistics.median(rates), "rates": rates, "threads": torch.get_num_threads(),
            "processes": summary["processes"], "sharding": summary["sharding"],
            "precision": summary["precision"], "losses": [r["loss"] for r in rows if "loss" in r]}))


def run_config(args, processes: int, sharding: str, work: Path) -> dict:
    out = work / f"{processes}-{sharding}"
    argv = [str(Path(__file__).resolve()), "--worker", "--data", args.data, "--out-dir", str(out),
            "--sharding", sharding, *(f"--{k}={getattr(args, k.replace('-', '_'))}" for k in
                                      ("layers", "hidden", "heads", "ffn", "seq-len", "batch-size", "warmup", "steps",
                                       "precision"))]
    if processes == 1:
        command = [sys.executable, *argv]
    else:
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}",
                   *argv]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return json.loads((out / "measured.json").read_text())


# -- communication volume, computed ----------------------------------------------------------------------------------
def method_parameters(size: dict) -> dict[str, dict[str, int]]:
    """P_t, P_root, P_f, P_lab (module docstring) of each method's training module at `size`: the models built, the
    objectives' own modules counted from the hidden size."""
    from metaxlm.config import ModelConfig
    from metaxlm.models import build_mlm
    from metaxlm.models.arch import arch_of
    from metaxlm.pretrain.objectives.dwa import default_label_layer

    class Vocabulary:  # what build_mlm reads of a tokenizer: its length and padding id
        pad_token_id = 1

        def __len__(self) -> int:
            return size["vocab"]

    d, n_layers = size["hidden"], size["layers"]
    counts = {}
    for arch in ("bert", "veco"):
        cfg = ModelConfig(arch=arch, layers=n_layers, hidden=d, heads=size["heads"], ffn=size["ffn"])
        model = build_mlm(cfg, Vocabulary())
        a = arch_of(model)
        counts[arch] = {"total": sum(p.numel() for p in model.parameters()),
                        "layer": sum(p.numel() for p in a.layers(model)[0].parameters()),
                        "embeddings": sum(p.numel() for p in a.embeddings(model).parameters())}
        del model
    pointer = 2 * (d * d + d)  # DWA's query and key projections
    projection = d * d + d     # MoCo's query head; its key head is a frozen copy

    def method(arch: str, *, extra_trainable=0, extra_root=0, labelled_layers=None, passes=1,
               frozen=0) -> dict[str, int]:
        c = counts[arch]
        layers = n_layers * c["layer"]
        return {"trainable": c["total"] + extra_trainable, "frozen": frozen, "layer": c["layer"],
                "root": c["total"] - layers + extra_root,
                "forward_layers": passes * layers,
                "labelling_layers": None if labelled_layers is None else labelled_layers * c["layer"]}

    return {
        "MLM / TLM (XLM, MetaXLM)": method("bert"),
        "XLM-Align (TLM + DWA)": method("bert", extra_trainable=pointer, extra_root=pointer,
                                        labelled_layers=default_label_layer(n_layers)),
        # the momentum encoder: a frozen copy of the encoder, its embeddings in the root, its layers called to label
        "PPA (MoCo + TLM)": method("bert", extra_trainable=projection,
                                   extra_root=2 * projection + counts["bert"]["embeddings"],
                                   labelled_layers=n_layers,
                                   frozen=projection + counts["bert"]["embeddings"]
                                   + n_layers * counts["bert"]["layer"]),
        # the IS pass, then the CS pass through the same layers (with cross-attention): each layer gathered twice
        "VECO (IS + CS MLM)": method("veco", passes=2),
    }


def communication(params: dict, processes: int, micro_batches: int) -> dict[str, float]:
    """Bytes each process sends per optimizer step (the formulas in the module docstring)."""
    share = (processes - 1) / processes
    ddp = 2 * share * params["trainable"] * BYTES
    per_micro = params["root"] + 2 * params["forward_layers"] + params["trainable"]
    if params["labelling_layers"] is not None:
        per_micro += params["root"] + params["labelling_layers"]
    return {"ddp_bytes": ddp, "fsdp_bytes": micro_batches * share * per_micro * BYTES}


def training_state_memory(params: dict, processes: int) -> dict[str, float]:
    """Bytes of weights, gradients and AdamW's two moments (fp32: 4 + 4 + 8 per trainable parameter, 4 per frozen
    one) each process holds: whole under DDP; under FSDP its 1/N shard plus what is gathered at once at most (the
    root group, and one layer). Activations come on top of both."""
    state = 16 * params["trainable"] + 4 * params["frozen"]
    return {"ddp_bytes": state, "fsdp_bytes": state / processes + 4 * (params["root"] + params["layer"])}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--hidden", type=int, default=384)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--ffn", type=int, default=1536)
    ap.add_argument("--vocab-size", type=int, default=32000)
    ap.add_argument("--langs", default="en,de", help="demo languages of the bench data")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps")
    ap.add_argument("--steps", type=int, default=12, help="timed steps")
    ap.add_argument("--precision", choices=["auto", "bf16", "fp32"], default="auto")
    ap.add_argument("--cache", default=str(REPO / ".cache" / "bench-pretrain"))
    ap.add_argument("--out", default=str(REPO / "runs" / "bench" / "scaling.json"))
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--out-dir", help=argparse.SUPPRESS)
    ap.add_argument("--sharding", default="none", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args)

    from metaxlm.run.info import cpu_model

    args.data = str(prepare_data(Path(args.cache), vocab_size=args.vocab_size, sample_sentences=200_000,
                                 heldout_texts=300, langs=args.langs.split(",")))
    measured = {}
    with tempfile.TemporaryDirectory() as work:
        for name, processes, sharding in CONFIGS:
            measured[name] = run_config(args, processes, sharding, Path(work))
            print(f"{name}: {measured[name]['tokens_per_s']:.0f} tokens/s", flush=True)
    one = measured[CONFIGS[0][0]]["tokens_per_s"]
    for row in measured.values():
        row["speed_vs_1_process"] = row["tokens_per_s"] / one
    losses = {name: row["losses"] for name, row in measured.items()}
    methods = method_parameters(PAPER_SIZE)
    volume = {method: {f"{n} processes": communication(p, n, 1) | {
                  "training_state": training_state_memory(p, n)} for n in (2, 8, 16)} | {"parameters": p}
              for method, p in methods.items()}
    record = {"cpu": cpu_model(), "cores": len(os.sched_getaffinity(0)),
              "model": {k: getattr(args, k) for k in ("layers", "hidden", "heads", "ffn", "vocab_size")},
              "batch": {"sequences": args.batch_size, "seq_len": args.seq_len, "timed_steps": args.steps},
              "measured": measured,
              "same_losses_within": max(abs(a - b) / abs(b) for name in losses for a, b in
                                        zip(losses[name], losses[CONFIGS[0][0]], strict=True)),
              "communication_per_step": {"size": PAPER_SIZE, "bytes_per_value": BYTES, "micro_batches": 1,
                                         "methods": volume}}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1))
    print(f"-> {out}")


if __name__ == "__main__":
    main()
