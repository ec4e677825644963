"""The named roots a path in a run config or a task definition may start with, filled in before `{lang}`:

- `{data}`: the benchmark data (SIB-200, Tatoeba, UD, XNLI, ...; docs/benchmark-data.md says where to get each and
  the layout expected under it). The environment variable METAXLM_DATA, else `../shared/data` (this repository's
  CI layout). Relative roots, like every relative path in a config, are relative to the working directory.
- `{demo}`: the demo data shipped inside the package (metaxlm's own copy, wherever it is installed).

One mechanism for both: `expand_roots`. A path without a root is used as written.
"""

from __future__ import annotations

import os
from pathlib import Path

DATA_ENV = "METAXLM_DATA"
DEFAULT_DATA_ROOT = "../shared/data"


def data_root() -> str:
    """The benchmark-data root: $METAXLM_DATA, else ../shared/data."""
    return os.environ.get(DATA_ENV) or DEFAULT_DATA_ROOT


def demo_root() -> str:
    """The demo data shipped with metaxlm."""
    return str(Path(__file__).resolve().parents[2] / "data" / "demo")


ROOTS = {"data": data_root, "demo": demo_root}


def expand_roots(path: str) -> str:
    """`path` with each `{data}` / `{demo}` replaced by its root (other `{...}` placeholders are left as they are)."""
    for name, root in ROOTS.items():
        token = "{" + name + "}"
        if token in path:
            path = path.replace(token, root())
    return path
