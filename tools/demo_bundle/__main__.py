"""`python -m tools.demo_bundle [--out DIR] [--cache DIR]` (what `make demo-data` runs)."""

import sys

from tools.cli import run_builder
from tools.demo_bundle import build_demo

if __name__ == "__main__":
    # the package's copy itself: data/demo is a link to it, which replacing the output would turn into a directory
    sys.exit(run_builder("python -m tools.demo_bundle", "Rebuild the demo bundle (src/metaxlm/demo_data) from "
                         "Debian and PyPI packages.", build_demo, "src/metaxlm/demo_data"))
