"""Arrow preparation throughput: 1 worker vs 2 workers on the same corpus, side by side in one run.

Corpus: the large corpora (.cache/large-corpora, built by `make large-corpora` or `make bench`) when
present, else the shipped demo bundle; a fixed number of lines per language so the run takes a few
minutes. Writes runs/bench/prepare_throughput.json with texts/s, tokens/s, the speed-up and peak RSS of
each setting.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def corpus_files(langs: list[str]) -> dict[str, Path]:
    from metaxlm.data.readers import count_lines

    large = REPO / ".cache" / "large-corpora" / "mono"
    out = {}
    for lang in langs:
        cands = [large / f"{lang}.txt.gz", REPO / "data" / "demo" / "mono" / f"{lang}.txt.xz"]
        # the large corpora have no Hindi monolingual text: fall back to the demo bundle
        out[lang] = next(p for p in cands if p.exists() and count_lines(p, nonblank=True))
    return out


def one_setting(num_proc: int, files: dict[str, Path], tok_dir: Path, rust_threads: bool) -> dict:
    """Run in a child process so peak RSS is per setting. `rust_threads`: let the tokenizers backend
    use its own thread pool (it parallelizes encode_batch over all cores by itself)."""
    code = f"""
import json, resource, time
from metaxlm.config import CorpusSpec, PrepareConfig
from metaxlm.data.prepare import prepare_corpora
import tempfile
specs = {{k: CorpusSpec(path=v) for k, v in {json.dumps({k: str(v) for k, v in files.items()})}.items()}}
t = time.perf_counter()
with tempfile.TemporaryDirectory() as d:
    meta = prepare_corpora(specs, {{}}, {str(tok_dir)!r}, d + "/out", PrepareConfig(num_proc={num_proc}), progress=False)
secs = time.perf_counter() - t
texts = sum(v["examples"] for v in meta["mono"].values()); tokens = sum(v["tokens"] for v in meta["mono"].values())
print(json.dumps({{"num_proc": {num_proc}, "tokenizer_threads": {rust_threads}, "seconds": secs, "texts": texts, "tokens": tokens,
                  "texts_per_s": texts / secs, "tokens_per_s": tokens / secs,
                  "peak_rss_mb_main": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "peak_rss_mb_workers": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}}))
"""  # noqa: E501 (the child script, kept byte-identical)
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "true" if rust_threads else "false"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--langs", default="en,de,ru,zh,ja,hi")
    ap.add_argument("--lines", type=int, default=20_000, help="lines per language")
    ap.add_argument("--out", default=str(REPO / "runs" / "bench" / "prepare_throughput.json"))
    args = ap.parse_args()

    from metaxlm.config import CorpusSpec, VocabConfig
    from metaxlm.data.corpus import iter_texts
    from metaxlm.vocab import train_vocab

    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        files = {}
        for lang, src in corpus_files(args.langs.split(",")).items():
            dst = work / f"{lang}.txt"
            dst.write_text("\n".join(itertools.islice(iter_texts(CorpusSpec(path=str(src))), args.lines)) + "\n")
            files[lang] = dst
        tok = work / "tok"
        train_vocab({k: CorpusSpec(path=str(v)) for k, v in files.items()},
                    VocabConfig(size=8000, sample_sentences=50_000),
                    tok, alpha=0.7, progress=False)
        # baseline: one process, one thread; then the tokenizer's threads; then metaxlm's worker processes
        results = [one_setting(1, files, tok, False), one_setting(1, files, tok, True),
                   one_setting(2, files, tok, False)]
    report = {
        "benchmark": "prepare_throughput",
        "corpus": {k: str(v) for k, v in corpus_files(args.langs.split(",")).items()},
        "lines_per_language": args.lines, "settings": results,
        "speedup_2proc_vs_1proc_1thread": results[2]["tokens_per_s"] / results[0]["tokens_per_s"],
        "speedup_1proc_rust_threads_vs_1proc_1thread": results[1]["tokens_per_s"] / results[0]["tokens_per_s"],
        "machine": {"cpus": len(os.sched_getaffinity(0))},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
