"""Anonymous memory of a pretraining stream against the number of texts (docs/reliability/larger-than-memory.md).

For each size, a synthetic prepared dataset of one-token texts is saved the way `metaxlm data prepare` saves its
data (`save_shards`), then a fresh process measures RssAnon (anonymous memory: what a memory limit cannot reclaim)
before `datasets.load_from_disk` and after a `TextStream` over it has read its first text (which builds the epoch
order). One-token texts leave only the fixed cost per text. The slope between the smallest and the largest size is
that cost in bytes per text.

    python bench/stream_memory.py                                                  # as prepared and read now
    python bench/stream_memory.py --rows-per-batch 1000 --spill-min-rows 1e12      # as before: order on the heap
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import sys
import datasets
from metaxlm.pretrain.batches import streams
streams.SPILL_MIN_ROWS = int(sys.argv[2])
def anon():
    return next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("RssAnon"))
before = anon()
ds = datasets.load_from_disk(sys.argv[1])
stream = streams.TextStream(ds, "en", seed=0)
stream.next_text()
print(anon() - before, ds.data.column("input_ids").num_chunks)
"""


def make(path: Path, n: int, rows_per_batch: int) -> None:
    import datasets
    import numpy as np
    import pyarrow as pa

    from metaxlm.data.prepare import save_shards

    datasets.disable_progress_bars()
    ids = pa.ListArray.from_arrays(pa.array(np.arange(n + 1, dtype=np.int32)), pa.array(np.full(n, 7, np.int32)))
    table = pa.table({"input_ids": ids, "length": pa.array(np.ones(n, np.int32))})
    save_shards(datasets.Dataset(table), path, rows_per_batch=rows_per_batch)


def main() -> None:
    from metaxlm.data.prepare import RECORD_BATCH_ROWS
    from metaxlm.pretrain.batches.streams import SPILL_MIN_ROWS

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sizes", type=float, nargs="*", default=[1e6, 2e6, 4e6, 8e6], help="numbers of texts")
    ap.add_argument("--rows-per-batch", type=int, default=RECORD_BATCH_ROWS, help="Arrow record batch size")
    ap.add_argument("--spill-min-rows", type=float, default=SPILL_MIN_ROWS,
                    help="orders of this many rows or more go to a file mapping")
    args = ap.parse_args()
    sizes = sorted(int(s) for s in args.sizes)
    grown = {}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    with tempfile.TemporaryDirectory(prefix="metaxlm-stream-memory-") as work:
        for n in sizes:
            t = time.time()
            make(Path(work) / str(n), n, args.rows_per_batch)
            out = subprocess.run([sys.executable, "-c", CHILD, str(Path(work) / str(n)), str(int(args.spill_min_rows))],
                                 capture_output=True, text=True, check=True, env=env).stdout.split()
            grown[n] = int(out[0])
            print(f"{n:>11,} texts: +{grown[n] / 2**20:6.2f} MiB anonymous, {int(out[1]):,} record batches "
                  f"({time.time() - t:.1f} s)", flush=True)
    if len(sizes) > 1:
        slope = (grown[sizes[-1]] - grown[sizes[0]]) / (sizes[-1] - sizes[0])
        print(f"slope {sizes[0]:,} -> {sizes[-1]:,} texts: {slope:.2f} bytes/text")


if __name__ == "__main__":
    sys.path.insert(0, str(REPO / "src"))
    main()
