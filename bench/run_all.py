"""Run every benchmark script in bench/ (each writes its JSON under runs/bench/).

`--soak` runs the reliability benchmarks instead (issue 13: kills, full disks, fuzzed inputs, corpora larger than
memory, multi-process faults): they take long and mount tmpfs / make cgroups, so `make bench` leaves them to
`make soak`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOAK = ("soak_kill.py", "disk_full.py", "fuzz_inputs.py", "larger_than_memory.py", "multiprocess_faults.py")


def main() -> int:
    soak = "--soak" in sys.argv[1:]
    failed = []
    for script in sorted(HERE.glob("*.py")):
        if script.name == "run_all.py" or script.name.startswith("_"):  # helpers, not benchmarks
            continue
        if (script.name in SOAK) != soak:
            continue
        print(f"== {script.name}", flush=True)
        if subprocess.run([sys.executable, str(script)]).returncode != 0:
            failed.append(script.name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
