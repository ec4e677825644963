"""The command line both builders share: `--out`, `--cache`, `--no-progress`, and one-line errors."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from metaxlm.errors import MetaXLMError


def run_builder(prog: str, description: str, build: Callable[..., object], default_out: str,
                argv: list[str] | None = None) -> int:
    """Parse the arguments, run `build(out, cache, progress=...)` and report; exit status 2 on a known error."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--out", default=default_out,
                        help=f"output dir, replaced when complete (default: {default_out})")
    parser.add_argument("--cache", default=".cache/registry", help="where downloaded packages are kept")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    try:
        build(Path(args.out), Path(args.cache), progress=not args.no_progress)
    except MetaXLMError as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    print(f"built {args.out}")
    return 0
