"""Generation tokens/s of `metaxlm translate`'s batched beam search against a plain HF `generate()` loop over single
sentences, on the same model and inputs, in one run.

Model: a small BERT2BERT `EncoderDecoderModel` (the layout `metaxlm veco export --nlg` writes; sizes below) with a
sentencepiece vocabulary trained on the demo bundle's English and German text, fine-tuned briefly on the demo's
en-de training pairs by the `translation` task itself, so that it stops at EOS after a sentence-like length as a
real model does (a random model would always run to max_new_tokens). Both are built once and cached under
.cache/bench-translate/. Inputs: the first English sentences of data/demo/retrieval/en-de.tsv.xz (held-out pages).

Sides, same beam size, length penalty and max_new_tokens, same threads:
* batched: `metaxlm.finetune.translate.generate_translations` (sentences sorted by length, batches of --batch-size,
  outputs put back in input order), the path of `metaxlm translate`;
* single: `model.generate()` on one tokenized sentence at a time.
The sides alternate (--repeats runs each); each is reported by its fastest run (the machine is shared and noisy).
Tokens = generated tokens up to and including EOS, padding not counted. Also recorded: whether the two sides
produced identical translations (beam search decides per sentence, so they should). Target of issue 11: >= 3x.
Writes runs/bench/translate_throughput.json.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_SPEEDUP = 3.0
MODEL_SIZES = {"hidden_size": 192, "num_hidden_layers": 3, "num_attention_heads": 4, "intermediate_size": 768}


def build(cache: Path, train_steps: int) -> Path:
    """The tokenizer and the briefly fine-tuned model, once (cached in `cache/model`)."""
    import torch
    import transformers

    from metaxlm.config import CorpusSpec, VocabConfig
    from metaxlm.data.benchmarks import load_examples
    from metaxlm.finetune.spec import Hyperparameters
    from metaxlm.finetune.task_data import cap
    from metaxlm.finetune.tasks import get_task
    from metaxlm.finetune.trainer import finetune
    from metaxlm.io import atomic_dir
    from metaxlm.vocab import load_tokenizer, train_vocab

    model_dir = cache / "model"
    if (model_dir / "config.json").exists():
        return model_dir
    vocab = cache / "vocab"
    if not (vocab / "tokenizer_config.json").exists():
        demo = REPO / "data" / "demo" / "mono"
        train_vocab({lang: CorpusSpec(path=str(demo / f"{lang}.txt.xz")) for lang in ("en", "de")},
                    VocabConfig(size=8000, sample_sentences=40_000), vocab, alpha=0.7, progress=False)
    tokenizer = load_tokenizer(vocab)

    def config(decoder: bool):
        return transformers.BertConfig(vocab_size=len(tokenizer), max_position_embeddings=128,
                                       pad_token_id=tokenizer.pad_token_id, is_decoder=decoder,
                                       add_cross_attention=decoder, **MODEL_SIZES)
    cfg = transformers.EncoderDecoderConfig.from_encoder_decoder_configs(config(False), config(True))
    cfg.decoder_start_token_id, cfg.eos_token_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    cfg.pad_token_id = tokenizer.pad_token_id
    transformers.set_seed(0)
    model = transformers.EncoderDecoderModel(config=cfg)
    hp = Hyperparameters(lr=1e-3, batch_size=16, max_steps=train_steps, max_seq_len=32, warmup_ratio=0.1,
                         label_smoothing=0.1, precision="fp32")
    task = get_task("translation")(tokenizer, hp)
    pairs = cap(load_examples("parallel_tsv", REPO / "data" / "demo" / "parallel" / "en-de.tsv.xz"), 4000)
    losses: list[float] = []
    finetune(model, task, pairs, hp, seed=0, progress=True, history=losses, desc="bench model")
    print(f"bench model: loss {losses[0]:.2f} -> {losses[-1]:.2f} in {len(losses)} steps", flush=True)
    with atomic_dir(model_dir) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        torch.save({"losses": losses}, Path(tmp) / "training.pt")
    return model_dir


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sentences", type=int, default=64)
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=32, help="sentences per batch (batched side)")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--length-penalty", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=2, help="runs of each side, alternating")
    ap.add_argument("--train-steps", type=int, default=300, help="fine-tuning steps of the cached bench model")
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--cache", default=str(REPO / ".cache" / "bench-translate"))
    ap.add_argument("--out", default=str(REPO / "runs" / "bench" / "translate_throughput.json"))
    ap.add_argument("--note", default="", help="free text for the record (e.g. how busy the machine was)")
    args = ap.parse_args()

    import torch

    from metaxlm.compute.precision import cpu_model
    from metaxlm.data.readers import read_parallel
    from metaxlm.finetune.models import load_finetune_tokenizer, load_seq2seq, special_token
    from metaxlm.finetune.translate import generate_translations
    from metaxlm.io import atomic_write_json

    torch.set_num_threads(args.threads)
    started = time.time()
    model_dir = build(Path(args.cache), args.train_steps)
    model = load_seq2seq(model_dir)
    tokenizer = load_finetune_tokenizer(model_dir)
    pad = special_token(model, "pad_token_id")
    texts = [en for en, _ in read_parallel(REPO / "data" / "demo" / "retrieval" / "en-de.tsv.xz")][:args.sentences]
    settings = {"num_beams": args.beam, "length_penalty": args.length_penalty, "max_new_tokens": args.max_new_tokens}

    def batched() -> tuple[list[str], int, float]:
        stats: dict = {}
        out = generate_translations(model, tokenizer, texts, batch_size=args.batch_size, stats=stats, **settings)
        return out, stats["tokens"], stats["seconds"]

    @torch.inference_mode()
    def single() -> tuple[list[str], int, float]:
        out, tokens = [], 0
        start = time.perf_counter()
        for text in texts:
            enc = tokenizer([text], return_tensors="pt", truncation=True, max_length=128)
            ids = model.generate(**enc, do_sample=False, **settings)[0, 1:]
            tokens += int((ids != pad).sum())
            out.append(tokenizer.decode(ids, skip_special_tokens=True).strip())
        return out, tokens, time.perf_counter() - start

    sides = {"batched": batched, "single": single}
    order = [s for k in range(args.repeats) for s in (("batched", "single") if k % 2 == 0 else ("single", "batched"))]
    runs: dict[str, list[dict]] = {s: [] for s in sides}
    outputs: dict[str, list[str]] = {}
    batched()  # warm-up (first calls allocate and pick kernels)
    for side in order:
        out, tokens, seconds = sides[side]()
        outputs[side] = out
        runs[side].append({"tokens": tokens, "seconds": round(seconds, 3), "tokens_per_s": round(tokens / seconds, 1)})
        print(f"{side}: {tokens} tokens in {seconds:.1f}s = {tokens / seconds:.0f} tokens/s", flush=True)
    best = {s: max(r["tokens_per_s"] for r in rs) for s, rs in runs.items()}
    speedup = best["batched"] / best["single"]
    differ = [i for i, (a, b) in enumerate(zip(outputs["batched"], outputs["single"], strict=True)) if a != b]
    record = {"bench": "translate_throughput", "when": datetime.datetime.now().isoformat(timespec="seconds"),
              "cpu": cpu_model(), "threads": torch.get_num_threads(), "python": sys.version.split()[0],
              "platform": platform.platform(), "torch": torch.__version__,
              "model": {"type": "EncoderDecoderModel (BERT encoder + BERT LM-head decoder with cross-attention)",
                        "encoder_and_decoder_each": MODEL_SIZES, "vocab_size": len(tokenizer),
                        "parameters": sum(p.numel() for p in model.parameters()),
                        "training": f"{args.train_steps} steps on demo en-de pairs (translation task)"},
              "inputs": "first English sentences of data/demo/retrieval/en-de.tsv.xz", "sentences": len(texts),
              "beam": args.beam, "length_penalty": args.length_penalty, "max_new_tokens": args.max_new_tokens,
              "batch_size": args.batch_size, "order": order, "runs": runs, "best_tokens_per_s": best,
              "speedup": round(speedup, 2), "target_speedup": TARGET_SPEEDUP, "meets_target": speedup >= TARGET_SPEEDUP,
              "identical_outputs": not differ, "differing_sentences": differ,
              "examples": [{"source": t, "translation": h} for t, h in zip(texts[:3], outputs["batched"][:3],
                                                                           strict=True)],
              "note": args.note,
              "seconds": round(time.time() - started, 1)}
    atomic_write_json(Path(args.out), record)
    print(f"batched beam-{args.beam} generation {speedup:.1f}x the one-sentence generate() loop (target >= "
          f"{TARGET_SPEEDUP:.0f}x); identical outputs: {not differ} -> {args.out}")


if __name__ == "__main__":
    main()
