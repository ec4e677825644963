"""Larger than memory: `metaxlm data prepare` and `metaxlm pretrain` on corpora several times the memory the
process tree is allowed (issue 13, "Larger than memory").

Corpora are generated from the demo text (data/demo/mono/{lang}.txt.xz, seeded shuffles of its lines repeated) at
sizes that are multiples of a memory limit (default: 0.5x, 1x, 2x and 4x a 480 MiB limit; the limit cannot be much
smaller: `metaxlm data prepare` imports the whole pipeline, torch included, ~290 MiB of anonymous memory before it
reads a line, and `metaxlm pretrain` needs ~360 MiB). For each size, in a
fresh working directory: `metaxlm data prepare` and then a short `metaxlm pretrain` of a tiny model (2 layers,
hidden 32), each as a child process in its own cgroup v1 memory cgroup with `memory.limit_in_bytes` = the limit (no
swap here; a child over the limit is OOM-killed, which counts as a failure). The vocabulary is trained once on the
demo text itself (it is not what is measured) and copied into each run.

What "peak RSS" means here (see docs/reliability/larger-than-memory.md):

  peak_anon_bytes      the cgroup's anonymous memory (memory.stat total_rss: heap, stacks, Python objects, numpy and
                       torch buffers of every process in the tree), polled every 20 ms: memory the kernel cannot
                       drop, the figure that must stay bounded. The headline number.
  peak_tree_rss_bytes  the sum of VmRSS over the tree's processes (/proc polling): anonymous memory plus resident
                       pages of memory-mapped files (the Arrow data), which the kernel reclaims under the limit.
  max_usage_bytes      the cgroup's memory.max_usage_in_bytes: exact, but it includes the page cache of every file
                       read or written, so for a corpus larger than the limit it reaches the limit by design (the
                       kernel then drops clean cache instead of killing anything).
  max_process_rss_bytes ru_maxrss of the largest single process of the tree (wait4 of the child).

Finishing with exit 0 under the limit is itself the exact check: the non-reclaimable memory never exceeded it.

Without cgroups (not root, no v1 memory controller) the runs go on without a limit and say why in "limit"; RLIMIT_AS
is not used as a fallback because it counts memory-mapped files (the Arrow data), so it would fail by design.

Writes runs/bench/larger_than_memory.json (atomically, with the CPU model and torch version) and
runs/bench/larger_than_memory.png (peak memory against corpus size, the limit as a horizontal line, corpus = limit
as a diagonal). Corpora and runs live in a working directory under runs/ (removed afterwards unless --keep).

    python bench/larger_than_memory.py                 # the default run (30-60 min niced on a shared core:
                                                       # tokenizing runs at ~1 MiB/s of text per CPU second)
    python bench/larger_than_memory.py --multiples 0.1 0.2 --steps 10    # a quick look (~5 min)
    python bench/larger_than_memory.py --multiples 0.5 1 2                # without the 4x corpus (~25 min less)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CGROUP_ROOT = Path("/sys/fs/cgroup/memory")
TINY = {"layers": 2, "hidden": 32, "heads": 2, "ffn": 64, "max_positions": 64}
LANGS = ("en", "de", "ru", "zh")
MiB = 1 << 20


def parse_size(text: str) -> int:
    """'384MiB', '512MB' (= MiB here), '1GiB', '65536' -> bytes."""
    t = text.strip().lower().removesuffix("b").removesuffix("i")
    scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(t[-1:], 1)
    return int(float(t.rstrip("kmg")) * scale)


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


# -- the memory limit: a cgroup v1 memory cgroup per child -----------------------------------------------------------

class NoCgroup(Exception):
    """No cgroup v1 memory controller we may use: the runs go without a limit, and the reason is recorded."""


class MemoryCgroup:
    """A fresh memory cgroup with `limit` bytes; `preexec` puts a child into it before exec (so every process it starts
    is in it too); `close` removes it (after the tree has exited)."""

    def __init__(self, name: str, limit: int):
        if not CGROUP_ROOT.is_dir() or not (CGROUP_ROOT / "memory.limit_in_bytes").exists():
            raise NoCgroup(f"no cgroup v1 memory controller at {CGROUP_ROOT}")
        if os.geteuid() != 0:
            raise NoCgroup("creating a memory cgroup needs root")
        self.path = CGROUP_ROOT / f"{name}-{os.getpid()}"
        try:
            self.path.mkdir()
            (self.path / "memory.limit_in_bytes").write_text(str(limit))
            if (self.path / "memory.memsw.limit_in_bytes").exists():  # no escape into swap either
                try:
                    (self.path / "memory.memsw.limit_in_bytes").write_text(str(limit))
                except OSError:
                    pass
        except OSError as e:
            self.path.rmdir() if self.path.exists() else None
            raise NoCgroup(f"cannot set up a memory cgroup under {CGROUP_ROOT}: {e}") from None
        self.limit = int((self.path / "memory.limit_in_bytes").read_text())

    def preexec(self) -> None:  # runs in the child between fork and exec
        with open(self.path / "cgroup.procs", "w") as f:
            f.write(str(os.getpid()))

    def stat(self) -> dict[str, int]:
        out = {}
        for line in (self.path / "memory.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            out[key] = int(value)
        return out

    def read(self, name: str) -> int:
        return int((self.path / name).read_text().strip())

    def pids(self) -> list[int]:
        return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]

    def oom_kills(self) -> int:
        fields = dict(line.split() for line in (self.path / "memory.oom_control").read_text().splitlines())
        return int(fields.get("oom_kill", 0))

    def close(self) -> None:
        for _ in range(50):  # the tree's processes must be gone (they are waited for) and the cache moved out
            try:
                self.path.rmdir()
                return
            except OSError:
                for pid in self.pids():  # a stray grandchild: it belongs to this bench's child tree
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                time.sleep(0.1)


def _tree_rss(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
                    break
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            pass
    return total


def _descendants(root: int) -> list[int]:
    """root and every process below it (from /proc's PPid), for the run without a cgroup."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int(next(ln for ln in (d / "status").read_text().splitlines()
                                if ln.startswith("PPid:")).split()[1])
            except (FileNotFoundError, ProcessLookupError, StopIteration, PermissionError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def run_limited(cmd: list[str], *, limit: int | None, name: str, log: Path, label: str,
                poll: float = 0.02) -> dict:
    """Run `cmd` (stdout and stderr to `log`) in a memory cgroup of `limit` bytes (None: no limit) and measure it."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    group, why = None, None
    if limit is not None:
        try:
            group = MemoryCgroup(name, limit)
        except NoCgroup as e:
            why = str(e)
    peaks = {"anon": 0, "tree_rss": 0}
    done = threading.Event()

    def sample(pid: int) -> None:
        last_print = time.perf_counter()
        while not done.is_set():
            if group is not None:
                try:
                    stat = group.stat()
                    peaks["anon"] = max(peaks["anon"], stat.get("total_rss", stat.get("rss", 0)))
                    peaks["tree_rss"] = max(peaks["tree_rss"], _tree_rss(group.pids()))
                except (FileNotFoundError, OSError):
                    pass
            else:
                peaks["tree_rss"] = max(peaks["tree_rss"], _tree_rss(_descendants(pid)))
            now = time.perf_counter()
            if now - last_print >= 30:
                last_print = now
                print(f"    {label}: {now - started:5.0f} s, peak anon {human(peaks['anon'])}, "
                      f"peak tree RSS {human(peaks['tree_rss'])}", flush=True)
            done.wait(poll if group is not None else 0.2)

    started = time.perf_counter()
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO,
                                preexec_fn=group.preexec if group is not None else None)
        watcher = threading.Thread(target=sample, args=(proc.pid,), daemon=True)
        watcher.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:  # interrupted (Ctrl-C): end the child's tree and remove the cgroup before leaving
            done.set()
            for pid in (group.pids() if group is not None else _descendants(proc.pid)):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            proc.wait()
            if group is not None:
                group.close()
            raise
        proc.returncode = os.waitstatus_to_exitcode(status)
        done.set()
        watcher.join()
    seconds = time.perf_counter() - started
    record = {"exit_code": proc.returncode, "seconds": round(seconds, 1),
              "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 1),
              "peak_anon_bytes": peaks["anon"] if group is not None else None,
              "peak_tree_rss_bytes": peaks["tree_rss"], "max_process_rss_bytes": usage.ru_maxrss * 1024}
    if group is not None:
        record.update(max_usage_bytes=group.read("memory.max_usage_in_bytes"), failcnt=group.read("memory.failcnt"),
                      oom_kills=group.oom_kills(), limit_bytes=group.limit)
        group.close()
    else:
        record.update(limit_bytes=None, no_limit_reason=why or "no limit asked for")
    record["oom_killed"] = bool(record.get("oom_kills")) or proc.returncode == -signal.SIGKILL
    record["ok"] = proc.returncode == 0
    if not record["ok"]:
        record["log_tail"] = log.read_text(errors="replace").strip().splitlines()[-5:]
    return record


def cgroup_available() -> str | None:
    """None when a memory cgroup can be made here, else why not."""
    try:
        MemoryCgroup("metaxlm-probe", 64 * MiB).close()
        return None
    except NoCgroup as e:
        return str(e)


# -- corpora, vocabulary and configs -----------------------------------------------------------------------------

def demo_lines(langs) -> dict[str, list[str]]:
    from metaxlm.data.readers import read_text

    return {lang: list(read_text(REPO / "data" / "demo" / "mono" / f"{lang}.txt.xz")) for lang in langs}


def generate_corpus(lines: dict[str, list[str]], target: int, out: Path, seed: int = 0) -> dict:
    """One plain-text file per language, together `target` bytes (each language an equal share): the demo lines in
    a fresh seeded order on every pass, whole lines only. Returns bytes and lines per language."""
    out.mkdir(parents=True, exist_ok=True)
    share = target // len(lines)
    info = {}
    for i, (lang, texts) in enumerate(sorted(lines.items())):
        rng = random.Random(seed * 1000 + i)
        written = n = 0
        with open(out / f"{lang}.txt", "wb", buffering=MiB) as f:
            while written < share:
                order = texts[:]
                rng.shuffle(order)
                for text in order:
                    raw = (text + "\n").encode()
                    if written + len(raw) > share and n:
                        break
                    f.write(raw)
                    written += len(raw)
                    n += 1
                else:
                    continue
                break
        info[lang] = {"bytes": written, "lines": n}
    return info


def train_demo_vocab(langs, out: Path, size: int) -> None:
    from metaxlm.config import CorpusSpec, VocabConfig
    from metaxlm.vocab import train_vocab

    specs = {lang: CorpusSpec(path=str(REPO / "data" / "demo" / "mono" / f"{lang}.txt.xz")) for lang in langs}
    train_vocab(specs, VocabConfig(size=size, sample_sentences=50_000), out, alpha=0.7, progress=False)


def write_config(path: Path, run_dir: Path, corpus: Path, langs, *, steps: int, num_proc: int) -> None:
    import yaml

    path.write_text(yaml.safe_dump({
        "output_dir": str(run_dir),
        "data": {"languages": list(langs), "mono": str(corpus / "{lang}.txt"), "alpha": 0.7},
        "prepare": {"num_proc": num_proc, "heldout_texts": 50},
        "model": TINY,
        "train": {"steps": steps, "batch_size": 16, "seq_len": 64, "warmup_steps": 2, "lr": 1e-3,
                  "log_every": max(1, steps // 5), "eval_every": steps, "save_every": steps, "eval_sequences": 8,
                  "precision": "fp32"},
        "variants": {"xlm": {"init": "none"}},
    }, sort_keys=False))


# -- the bench ---------------------------------------------------------------------------------------------------

def measure_size(multiple: float, *, limit: int | None, nominal_limit: int, lines, vocab: Path, work: Path,
                 steps: int, num_proc: int, keep: bool) -> dict:
    tag = f"x{multiple:g}"
    corpus, run = work / f"corpus-{tag}", work / f"run-{tag}"
    shutil.rmtree(corpus, ignore_errors=True)
    shutil.rmtree(run, ignore_errors=True)
    t0 = time.perf_counter()
    files = generate_corpus(lines, int(multiple * nominal_limit), corpus)
    record: dict = {"multiple": multiple, "corpus_bytes": sum(f["bytes"] for f in files.values()),
                    "corpus_lines": sum(f["lines"] for f in files.values()), "files": files,
                    "generate_seconds": round(time.perf_counter() - t0, 1)}
    shutil.copytree(vocab, run / "vocab")
    config = work / f"config-{tag}.yaml"
    write_config(config, run, corpus, sorted(lines), steps=steps, num_proc=num_proc)
    cli = [sys.executable, "-m", "metaxlm.cli"]
    log = work / f"log-{tag}.txt"
    print(f"  {tag}: corpus {human(record['corpus_bytes'])} ({record['corpus_lines']:,} lines), prepare ...",
          flush=True)
    record["prepare"] = run_limited(cli + ["data", "prepare", str(config), "--no-progress"], limit=limit,
                                    name="metaxlm-prepare", log=log, label=f"{tag} prepare")
    p = record["prepare"]
    p["mb_per_s"] = round(record["corpus_bytes"] / MiB / max(p["seconds"], 1e-9), 2)
    if p["ok"]:
        meta = json.loads((run / "prepared" / "meta.json").read_text())
        p["examples"] = sum(v["examples"] + v["heldout_examples"] for v in meta["mono"].values())
        p["tokens"] = sum(v["tokens"] for v in meta["mono"].values())
        p["prepared_bytes"] = sum(f.stat().st_size for f in (run / "prepared").rglob("*") if f.is_file())
        print(f"  {tag}: prepare {p['seconds']:.0f} s ({p['mb_per_s']} MiB/s), peak anon "
              f"{human(p['peak_anon_bytes'] or 0)}, tree RSS {human(p['peak_tree_rss_bytes'])}; pretrain ...",
              flush=True)
        record["pretrain"] = run_limited(cli + ["pretrain", str(config), "--no-progress"], limit=limit,
                                         name="metaxlm-pretrain", log=log, label=f"{tag} pretrain")
        t = record["pretrain"]
        summary = run / "pretrain" / "xlm" / "summary.json"
        if t["ok"] and summary.exists():
            t["steps"] = json.loads(summary.read_text())["steps"]
            t["steps_per_s"] = round(t["steps"] / t["seconds"], 2)
        print(f"  {tag}: pretrain {'ok' if t['ok'] else 'FAILED'} in {t['seconds']:.0f} s, peak anon "
              f"{human(t['peak_anon_bytes'] or 0)}, tree RSS {human(t['peak_tree_rss_bytes'])}", flush=True)
    else:
        record["pretrain"] = {"skipped": "prepare failed"}
        print(f"  {tag}: prepare FAILED (exit {p['exit_code']}, OOM-killed: {p['oom_killed']})", flush=True)
    record["ok"] = p["ok"] and record["pretrain"].get("ok", False)
    if not keep:
        shutil.rmtree(corpus, ignore_errors=True)
        shutil.rmtree(run, ignore_errors=True)
    return record


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [r for r in result["runs"]]
    x = [r["corpus_bytes"] / MiB for r in runs]
    fig, ax = plt.subplots(figsize=(7.5, 5))
    for step, marker in (("prepare", "o"), ("pretrain", "s")):
        pts = [(xi, r[step]) for xi, r in zip(x, runs, strict=True) if r[step].get("exit_code") is not None]
        if not pts:
            continue
        key = "peak_anon_bytes" if pts[0][1].get("peak_anon_bytes") is not None else "peak_tree_rss_bytes"
        ax.plot([p[0] for p in pts], [p[1][key] / MiB for p in pts], marker=marker, label=f"{step}: peak "
                f"{'anon (cgroup total_rss)' if key == 'peak_anon_bytes' else 'tree RSS'}")
        ax.plot([p[0] for p in pts], [p[1]["peak_tree_rss_bytes"] / MiB for p in pts], marker=marker, ls=":",
                alpha=0.6, label=f"{step}: peak tree RSS (+ libraries, mapped pages)")
        for xi, rec in pts:
            if not rec["ok"]:
                ax.annotate("OOM" if rec["oom_killed"] else "failed", (xi, rec.get(key) or 0), color="red")
    top = max(x) * 1.05
    limit = result["limit_bytes"]
    if limit:
        ax.axhline(limit / MiB, color="red", lw=1.2, label=f"memory limit ({human(limit)})")
    ax.plot([0, top], [0, top], color="grey", ls="--", lw=1, label="corpus size = memory")
    ax.set_xlim(0, top)
    highest = max((r[step].get("peak_tree_rss_bytes") or 0) / MiB for r in runs for step in ("prepare", "pretrain"))
    ax.set_ylim(0, max(limit / MiB if limit else 0, highest) * 1.25)
    ax.set_xlabel("corpus size (MiB of UTF-8 text)")
    ax.set_ylabel("peak memory (MiB)")
    ax.set_title("metaxlm data prepare + pretrain, each in a memory cgroup: peak memory against corpus size",
                 fontsize=9)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp")
    fig.savefig(tmp, dpi=120, format="png", bbox_inches="tight")
    plt.close(fig)
    os.replace(tmp, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", default="480MiB", help="memory limit of each child process tree (default 480MiB)")
    ap.add_argument("--multiples", type=float, nargs="+", default=[0.5, 1, 2, 4],
                    help="corpus sizes as multiples of the limit (default 0.5 1 2 4)")
    ap.add_argument("--langs", nargs="+", default=list(LANGS), help="demo languages the corpus is made of")
    ap.add_argument("--steps", type=int, default=40, help="pretraining steps per size")
    ap.add_argument("--num-proc", type=int, default=1, help="prepare's worker processes (inside the limit)")
    ap.add_argument("--vocab-size", type=int, default=2000)
    ap.add_argument("--no-limit", action="store_true", help="measure without a memory limit")
    ap.add_argument("--work", help="working directory (default: a new one under runs/bench/, removed afterwards)")
    ap.add_argument("--keep", action="store_true", help="keep the corpora and runs")
    ap.add_argument("--out", default=str(REPO / "runs" / "bench" / "larger_than_memory.json"))
    ap.add_argument("--replot", action="store_true", help="only redraw the figure from the JSON at --out")
    args = ap.parse_args()
    if args.replot:
        plot(json.loads(Path(args.out).read_text()), Path(args.out).with_suffix(".png"))
        return
    sys.path.insert(0, str(REPO / "src"))
    sys.path.insert(0, str(REPO / "bench"))

    from disk_full import machine

    from metaxlm.io import atomic_write_json

    nominal = parse_size(args.limit)
    why = "--no-limit" if args.no_limit else cgroup_available()
    limit = None if why else nominal
    if why:
        print(f"no memory limit: {why}", flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    result: dict = {"bench": "larger_than_memory", "machine": machine(),
                    "limit_bytes": limit, "limit_mechanism": "cgroup v1 memory.limit_in_bytes" if limit else None,
                    "no_limit_reason": why, "nominal_limit_bytes": nominal, "languages": args.langs,
                    "steps": args.steps, "num_proc": args.num_proc, "model": TINY,
                    "command": "python bench/larger_than_memory.py " + " ".join(sys.argv[1:]),
                    "peak_measures": {
                        "peak_anon_bytes": "cgroup memory.stat total_rss, polled every 20 ms (headline)",
                        "peak_tree_rss_bytes": "sum of VmRSS of the tree's processes, polled (incl. mapped files)",
                        "max_usage_bytes": "cgroup memory.max_usage_in_bytes (exact; includes page cache)",
                        "max_process_rss_bytes": "ru_maxrss of the largest single process (wait4)"},
                    "runs": []}
    base = Path(args.work) if args.work else out.parent
    base.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="larger_than_memory-", dir=None if args.work else base)) \
        if not args.work else base
    try:
        lines = demo_lines(args.langs)
        vocab = work / "vocab"
        if not (vocab / "tokenizer_config.json").exists():
            train_demo_vocab(args.langs, vocab, args.vocab_size)
        total = sum(args.multiples) * nominal
        done_bytes, done_seconds = 0.0, 0.0
        for i, m in enumerate(args.multiples):
            eta = f", ETA {((total - done_bytes) / (done_bytes / done_seconds)) / 60:.1f} min" if done_bytes else ""
            print(f"[{i + 1}/{len(args.multiples)}] corpus {m:g} x {human(nominal)} (limit "
                  f"{human(limit) if limit else 'none'}){eta}", flush=True)
            t0 = time.perf_counter()
            rec = measure_size(m, limit=limit, nominal_limit=nominal, lines=lines, vocab=vocab, work=work,
                               steps=args.steps, num_proc=args.num_proc, keep=args.keep)
            rec["corpus_over_limit"] = round(rec["corpus_bytes"] / nominal, 3)
            result["runs"].append(rec)
            done_bytes += m * nominal
            done_seconds += time.perf_counter() - t0
            result["seconds"] = round(time.perf_counter() - started, 1)
            atomic_write_json(out, result)  # what is measured so far survives an interrupted bench
    finally:
        if not args.keep and not args.work:
            shutil.rmtree(work, ignore_errors=True)
    result["all_ok"] = all(r["ok"] for r in result["runs"])
    result["seconds"] = round(time.perf_counter() - started, 1)
    atomic_write_json(out, result)
    plot(result, out.with_suffix(".png"))
    print(f"{'all sizes finished under the limit' if result['all_ok'] else 'FAILED'}: {out} "
          f"({result['seconds'] / 60:.1f} min)")
    for r in result["runs"]:
        p, t = r["prepare"], r["pretrain"]
        pretrain = f"pretrain {t['skipped']}" if "skipped" in t else \
            f"pretrain peak anon {human(t.get('peak_anon_bytes') or 0)} / tree RSS " \
            f"{human(t['peak_tree_rss_bytes'])} in {t['seconds']:.0f} s (exit {t['exit_code']})"
        print(f"  corpus {human(r['corpus_bytes']):>10} ({r['corpus_over_limit']:g} x limit): prepare peak anon "
              f"{human(p.get('peak_anon_bytes') or 0)} / tree RSS {human(p['peak_tree_rss_bytes'])} in "
              f"{p['seconds']:.0f} s (exit {p['exit_code']}); {pretrain}")
    if not result["all_ok"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
