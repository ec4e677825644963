"""Run every benchmark script in bench/ (each writes its JSON under runs/bench/)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    failed = []
    for script in sorted(HERE.glob("*.py")):
        if script.name == "run_all.py" or script.name.startswith("_"):  # helpers, not benchmarks
            continue
        print(f"== {script.name}", flush=True)
        if subprocess.run([sys.executable, str(script)]).returncode != 0:
            failed.append(script.name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
