"""The named roots a path in a run config or a task definition may start with, filled in before `{lang}`:

- `{data}`: the benchmark data (SIB-200, Tatoeba, UD, XNLI, ...; docs/benchmark-data.md says where to get each and
  the layout expected under it). The environment variable METAXLM_DATA, else `../shared/data` (this repository's
  CI layout). Relative roots, like every relative path in a config, are relative to the working directory.
- `{demo}`: the demo data shipped inside the package (metaxlm's own copy, wherever it is installed).

One mechanism for both: `expand_roots`. A path without a root is used as written.
"""

from __future__ import annotations

import os
from importlib.resources import files

DATA_ENV = "METAXLM_DATA"
DEFAULT_DATA_ROOT = "../shared/data"


def data_root() -> str:
    """The benchmark-data root: $METAXLM_DATA, else ../shared/data."""
    return os.environ.get(DATA_ENV) or DEFAULT_DATA_ROOT


def demo_root() -> str:
    """The demo data shipped inside the package (metaxlm/demo_data; a checkout's data/demo links to it)."""
    return str(files("metaxlm").joinpath("demo_data"))


ROOTS = {"data": data_root, "demo": demo_root}


def expand_roots(path: str) -> str:
    """`path` with each `{data}` / `{demo}` replaced by its root (other `{...}` placeholders are left as they are)."""
    for name, root in ROOTS.items():
        token = "{" + name + "}"
        if token in path:
            path = path.replace(token, root())
    return path


BENCHMARK_DATA_DOC = "docs/benchmark-data.md"


def data_root_origin() -> str:
    """Where the benchmark-data root came from, as a message says it."""
    if os.environ.get(DATA_ENV):
        return f"from ${DATA_ENV}"
    return f"the default; set {DATA_ENV} to your copy"


def missing_data_hint(path: str | os.PathLike) -> str:
    """For a missing file inside the benchmark-data root: the root, where it came from and the page that says how
    to get the data (appended to the "no such file" message); "" for any other path."""
    root = os.path.realpath(data_root())
    if os.path.commonpath([root, os.path.realpath(path)]) != root:
        return ""
    return f" (benchmark-data root {data_root()}, {data_root_origin()}; {BENCHMARK_DATA_DOC} says how to get it)"
