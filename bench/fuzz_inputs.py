"""How many hostile inputs the readers and the config loader survive (issue 13, "Hostile text input").

Runs the fuzz tests (tests/test_fuzz_readers.py, tests/test_fuzz_config.py) with METAXLM_FUZZ_EXAMPLES inputs per
generated test (default 1000; `make test` uses 150) and counts every input each test actually ran (hypothesis's
replays while shrinking included) through tests/fuzz_helpers.py's tally file. The only outcomes the tests allow are a
correct read or metaxlm's own DataError / ConfigError naming the file and line; a failing input fails the test, so
"inputs survived" is the count of a passing run.

Writes runs/bench/fuzz_inputs.json atomically (the CPU model, versions, the pytest outcome, inputs per test and in
all, wall time) and runs/bench/fuzz_inputs.png (inputs per test, the total in the title).
"""

from __future__ import annotations

import argparse
import collections
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FUZZ_TESTS = ("tests/test_fuzz_readers.py", "tests/test_fuzz_config.py")


def run_fuzz_tests(examples: int, tally: Path) -> dict:
    """pytest on the fuzz tests with `examples` inputs per generated test; the tally file counts each input run."""
    env = {**os.environ, "METAXLM_FUZZ_EXAMPLES": str(examples), "METAXLM_FUZZ_TALLY": str(tally)}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *FUZZ_TESTS],
                          cwd=REPO, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    summary = (done.stdout.strip().splitlines() or [""])[-1]
    return {"returncode": done.returncode, "pytest_summary": summary, "seconds": round(seconds, 1),
            "output_tail": "" if done.returncode == 0 else done.stdout[-4000:] + done.stderr[-2000:]}


def count_inputs(tally: Path) -> dict[str, int]:
    counts = collections.Counter(line for line in tally.read_text(encoding="utf-8").splitlines() if line) \
        if tally.exists() else collections.Counter()
    return dict(sorted(counts.items()))


def plot(result: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    per_test = result["inputs_per_test"]
    names = [n.removeprefix("test_").removeprefix("fuzz_") for n in per_test]
    fig, ax = plt.subplots(figsize=(9, 0.32 * len(names) + 1.4))
    ax.barh(names, list(per_test.values()), color="#4c72b0")
    ax.invert_yaxis()
    ax.set_xlabel("inputs tried: each a correct read or metaxlm's own error naming the file and line", fontsize=8)
    verdict = "all passed" if result["passed"] else "FAILED"
    ax.set_title(f"Fuzzed readers and config loader: {result['inputs_total']:,} inputs, {verdict}\n"
                 f"(METAXLM_FUZZ_EXAMPLES={result['examples_per_test']}, {result['seconds']:.0f} s)", fontsize=10)
    for y, value in enumerate(per_test.values()):
        ax.text(value, y, f" {value:,}", va="center", fontsize=8)
    ax.margins(x=0.12)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=int, default=1000, help="inputs per generated fuzz test (make test: 150)")
    ap.add_argument("--out", default=str(REPO / "runs" / "bench" / "fuzz_inputs.json"))
    args = ap.parse_args()
    if args.examples < 1:
        ap.error("--examples must be at least 1")
    from metaxlm.compute.precision import cpu_model
    from metaxlm.io import atomic_write_json

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        tally = Path(tmp) / "tally.txt"
        print(f"fuzzing the readers and the config loader, {args.examples} inputs per generated test ...", flush=True)
        run = run_fuzz_tests(args.examples, tally)
        per_test = count_inputs(tally)
    import hypothesis
    import torch

    result = {"benchmark": "fuzz_inputs", "cpu": cpu_model(), "python": platform.python_version(),
              "torch": torch.__version__, "hypothesis": hypothesis.__version__,
              "examples_per_test": args.examples, "tests": list(FUZZ_TESTS), "passed": run["returncode"] == 0,
              **run, "inputs_per_test": per_test, "inputs_total": sum(per_test.values())}
    atomic_write_json(out, result)
    plot(result, out.with_suffix(".png"))
    print(f"{result['inputs_total']:,} inputs over {len(per_test)} tests in {run['seconds']:.0f} s: "
          f"{run['pytest_summary']} -> {out}", flush=True)
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
