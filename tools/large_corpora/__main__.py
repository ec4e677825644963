"""`python -m tools.large_corpora [--out DIR] [--cache DIR]` (what `make large-corpora` runs)."""

import sys

from tools.cli import run_builder
from tools.large_corpora import build_large_corpora

if __name__ == "__main__":
    sys.exit(run_builder("python -m tools.large_corpora", "Build the large corpora from Debian packages.",
                         build_large_corpora, ".cache/large-corpora"))
