"""Train a shared sentencepiece vocabulary over a multilingual corpus drawn with p_i ∝ N_i^α.

Without rebalancing, a high-resource language would take most pieces; drawing the training sentences
with the same α as pretraining gives low-resource languages their share (XLM, XLM-R).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np
from tqdm import tqdm

from metaxlm.config import CorpusSpec, VocabConfig
from metaxlm.data.corpus import count_texts, iter_texts
from metaxlm.data.sampling import allocate, sampling_probs
from metaxlm.errors import SkipReport
from metaxlm.io import atomic_dir, atomic_write_json
from metaxlm.vocab.load import SPM_FILE, save_spm_as_hf


def draw_sample(spec: CorpusSpec, n_available: int, k: int, rng: np.random.Generator,
                report: SkipReport, skip_bad: bool) -> list[str]:
    """k texts from a corpus of n_available, streamed once: without replacement when k <= n, else
    every text floor(k/n) times plus a random remainder (upsampling a small language)."""
    reps, rest = divmod(k, n_available)
    extra = set(rng.choice(n_available, size=rest, replace=False).tolist()) if rest else set()
    out: list[str] = []
    for i, text in enumerate(iter_texts(spec, skip_bad=skip_bad, report=report)):
        times = reps + (i in extra)
        out.extend([text] * times)
    return out


def train_vocab(corpora: dict[str, CorpusSpec], vocab_cfg: VocabConfig, out_dir: str | Path, *, alpha: float,
                seed: int = 0, skip_bad: bool = False, progress: bool = True) -> dict:
    """Train sentencepiece on the α-sampled corpus; write an HF tokenizer dir and `vocab_stats.json`."""
    import sentencepiece as spm

    sizes = {lang: count_texts(spec) for lang, spec in corpora.items()}
    counts = allocate(sizes, alpha, vocab_cfg.sample_sentences)
    rng = np.random.default_rng(seed)
    report = SkipReport()
    with atomic_dir(out_dir) as tmp, tempfile.TemporaryDirectory() as work:
        sample_file = Path(work) / "sample.txt"
        with open(sample_file, "w", encoding="utf-8") as f:
            for lang in tqdm(sorted(corpora), desc="vocab sample", disable=not progress, unit="lang"):
                for text in draw_sample(corpora[lang], sizes[lang], counts[lang], rng, report, skip_bad):
                    f.write(text.replace("\n", " ") + "\n")
        spm.SentencePieceTrainer.train(
            input=str(sample_file), model_prefix=str(Path(work) / "spm"), vocab_size=vocab_cfg.size,
            model_type=vocab_cfg.model_type, character_coverage=vocab_cfg.character_coverage,
            # XLM-R layout: unk=0 bos=1 eos=2, no pad (the HF wrapper adds it).
            unk_id=0, bos_id=1, eos_id=2, pad_id=-1, input_sentence_size=0, shuffle_input_sentence=False,
            seed_sentencepiece_size=1_000_000, num_threads=2,
            # A tiny corpus may not support the requested size: take what it supports and record it.
            hard_vocab_limit=False, minloglevel=2,
        )
        tok = save_spm_as_hf(Path(work) / "spm.model", tmp)
        stats = {
            "vocab_size": len(tok),
            "requested_size": vocab_cfg.size,
            "alpha": alpha,
            "corpus_sizes": sizes,
            "sampling_probs": sampling_probs(sizes, alpha),
            "sampled_texts": counts,
            "skipped_bad_lines": report.skipped,
        }
        atomic_write_json(Path(tmp) / "vocab_stats.json", stats)
    if report.skipped:
        print(report.summary())
    if stats["vocab_size"] < vocab_cfg.size:
        print(f"metaxlm: warning: {short_vocabulary(stats, vocab_cfg.sample_sentences)}", file=sys.stderr, flush=True)
    return stats


def short_vocabulary(stats: dict, sample_sentences: int) -> str:
    """Why the trained vocabulary has fewer pieces than vocab.size asked for, and what to do, in one line:
    sentencepiece trains with hard_vocab_limit off (a small corpus still gets a vocabulary), so it stops where the
    sampled text has no more pieces to give."""
    sizes, drawn = stats["corpus_sizes"], stats["sampled_texts"]
    distinct = sum(min(drawn[lang], sizes[lang]) for lang in sizes)  # a text drawn twice brings no new piece
    total = sum(sizes.values())
    more = (f"raise vocab.sample_sentences (now {sample_sentences:,}; the corpora hold {total:,} texts), give more "
            f"text" if distinct < total else "give more text")
    return (f"vocabulary: {stats['vocab_size']:,} pieces, fewer than vocab.size={stats['requested_size']:,}: "
            f"sentencepiece found no more in the {distinct:,} distinct texts sampled (it takes what the text supports, "
            f"hard_vocab_limit off); {more}, or set vocab.size={stats['vocab_size']:,} or less")


def read_vocab_stats(tokenizer_dir: str | Path) -> dict:
    path = Path(tokenizer_dir) / "vocab_stats.json"
    return json.loads(path.read_text()) if path.exists() else {}


__all__ = ["SPM_FILE", "train_vocab", "read_vocab_stats"]
