"""Reading prepared Arrow rows for the batch sources: zero-copy row access, and endless epoch-shuffled streams of
texts (monolingual) or pairs (parallel), one stream per language / language pair, with a resumable position."""

from __future__ import annotations

import mmap
import os
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa

from metaxlm.errors import DataError
from metaxlm.seeds import derive_seed, position_weighted_key


def _lang_seed(seed: int, key: str) -> int:
    return derive_seed(seed, position_weighted_key(key))


# From this many rows on, an epoch order lives in a file mapping, not on the heap (see `permutation`).
SPILL_MIN_ROWS = 1_000_000


def data_dir(dataset) -> str | None:
    """The directory of a dataset's Arrow files (None for an in-memory dataset)."""
    files = getattr(dataset, "cache_files", None) or []
    return str(Path(files[0]["filename"]).parent) if files else None


def dataset_path(dataset, key: str) -> str:
    """Where a prepared dataset lives, for error messages (its first Arrow file's directory)."""
    return data_dir(dataset) or f"<prepared data {key}>"


class _ListColumn:
    """Random access to row i of a list<int> column straight from the Arrow buffers (memory-mapped, zero-copy):
    ~10x cheaper than `dataset[i][column]`, which formats a whole row through `datasets`."""

    def __init__(self, dataset, column: str):
        chunks = dataset.data.column(column).chunks
        self.offsets = [c.offsets.to_numpy() for c in chunks]  # absolute positions in each chunk's values
        self.values = [c.values.to_numpy(zero_copy_only=True) for c in chunks]
        self.starts = np.cumsum([0] + [len(c) for c in chunks[:-1]])

    @classmethod
    def of(cls, dataset, column: str) -> _ListColumn | None:
        """None when the dataset is not a plain Arrow table with a non-null integer-list column."""
        try:
            if getattr(dataset, "_indices", None) is not None:  # a select()/shuffle() view: rows are remapped
                return None
            col = dataset.data.column(column)
            if col.null_count or not all(pa.types.is_list(c.type) or pa.types.is_large_list(c.type)
                                         for c in col.chunks) or not pa.types.is_integer(col.type.value_type):
                return None
            return cls(dataset, column)
        except (AttributeError, KeyError, TypeError, ValueError, pa.ArrowException):
            return None

    def row(self, i: int) -> list[int]:
        k = int(np.searchsorted(self.starts, i, side="right")) - 1
        offsets, j = self.offsets[k], i - int(self.starts[k])
        return self.values[k][offsets[j]:offsets[j + 1]].tolist()

    def lengths(self) -> np.ndarray:
        """Length of every row, from the offsets alone (no values are read)."""
        return np.concatenate([np.diff(o) for o in self.offsets]) if self.offsets else np.zeros(0, np.int64)


class IdColumn:
    """One list<int> column of a dataset: the zero-copy `_ListColumn` when possible, else the dataset's own rows."""

    def __init__(self, dataset, column: str):
        self.ds, self.column = dataset, column
        self.fast = _ListColumn.of(dataset, column)

    def row(self, i: int) -> list[int]:
        return self.fast.row(i) if self.fast is not None else list(self.ds[i][self.column])

    def lengths(self) -> np.ndarray:
        if self.fast is not None:
            return self.fast.lengths()
        return np.array([len(x) for x in self.ds[self.column]], dtype=np.int64)


def _mapped_zeros(n: int, dtype, spill_dir: str | None) -> np.ndarray | None:
    """A writable array of n zeros in an anonymous file mapping: an unlinked temporary file in `spill_dir`, else in
    the default temp dir; None when neither has room. Its pages are page cache, which the kernel can write back and
    drop under a memory limit; anonymous memory it cannot drop. The file has no name (nothing is left behind, even
    after SIGKILL) and goes when the array does. The space is allocated up front: a mapping over a sparse file
    would die of SIGBUS on a full disk."""
    nbytes = n * np.dtype(dtype).itemsize
    for where in dict.fromkeys([spill_dir, None]):
        try:
            with tempfile.TemporaryFile(dir=where, prefix="metaxlm-order-") as f:
                os.posix_fallocate(f.fileno(), 0, nbytes)
                buf = mmap.mmap(f.fileno(), nbytes)  # keeps its own descriptor: the file can close
            return np.frombuffer(buf, dtype=dtype)  # a plain ndarray (np.memmap takes a ~100x slower shuffle path)
        except (OSError, ValueError):
            continue
    return None


def permutation(rng: np.random.Generator, n: int, spill_dir: str | None = None,
                spill_min_rows: int | None = None) -> np.ndarray:
    """`rng.permutation(n)`, the same values in the same order, held as int32 when n fits: the order is the one
    thing a stream keeps per row of a corpus (4 bytes a text instead of 8; the rows themselves stay memory-mapped).
    From `spill_min_rows` rows on (default SPILL_MIN_ROWS) the order is a file mapping beside the data
    (`_mapped_zeros`), filled and shuffled in place by the same `rng.shuffle`: the same values, off the heap."""
    dtype = np.int32 if n < 2**31 else np.int64
    order = None
    if n >= (SPILL_MIN_ROWS if spill_min_rows is None else spill_min_rows):
        order = _mapped_zeros(n, dtype, spill_dir)
    if order is None:
        order = np.arange(n, dtype=dtype)
    else:
        step = 1 << 16  # the arange in small slices, written in place: no full-size array, and no large temporary
        base = np.arange(step, dtype=dtype)  # that malloc would keep on the heap after it is freed
        for lo in range(0, n, step):
            hi = min(n, lo + step)
            np.add(base[:hi - lo], lo, out=order[lo:hi])
    rng.shuffle(order)  # what Generator.permutation(int) does, on an int64 arange; in place
    return order


class ShuffledOrder:
    """An endless order over n rows: a fresh seeded permutation every epoch. State: (epoch, pos). A large order
    lives in a file mapping in `spill_dir` (the data's directory; see `permutation`)."""

    def __init__(self, n: int, key: str, seed: int, spill_dir: str | None = None):
        self.n, self.key, self.seed, self.spill_dir = n, key, seed, spill_dir
        self.epoch, self.pos = 0, 0
        self._order = None

    def _perm(self) -> np.ndarray:
        if self._order is None or self._order[0] != self.epoch:
            rng = np.random.default_rng([_lang_seed(self.seed, self.key), self.epoch])
            self._order = None  # the old epoch's order goes before the new one is made: one order in memory
            self._order = (self.epoch, permutation(rng, self.n, self.spill_dir))
        return self._order[1]

    def next_index(self) -> int:
        if self.pos >= self.n:
            self.epoch, self.pos = self.epoch + 1, 0
        i = int(self._perm()[self.pos])
        self.pos += 1
        return i


class TextStream:
    """Endless stream of token-id lists from one monolingual Arrow dataset, reshuffled every epoch (seeded).
    `leftover` holds what a packing source has not used yet of the current text (part of the saved position)."""

    def __init__(self, dataset, key: str, seed: int, column: str = "input_ids"):
        self.ds, self.key, self.seed, self.column = dataset, key, seed, column
        self.order = ShuffledOrder(len(dataset), key, seed, data_dir(dataset))
        self.ids = IdColumn(dataset, column)
        self.leftover: list[int] = []

    @property
    def epoch(self) -> int:
        return self.order.epoch

    def next_text(self) -> list[int]:
        return self.ids.row(self.order.next_index())

    def state_dict(self) -> dict:
        return {"epoch": self.order.epoch, "pos": self.order.pos, "leftover": list(self.leftover)}

    def load_state_dict(self, state: dict) -> None:
        self.order.epoch, self.order.pos, self.leftover = state["epoch"], state["pos"], list(state["leftover"])


class PairStream:
    """Endless stream of (src_ids, tgt_ids) from one parallel Arrow dataset, reshuffled every epoch (seeded).

    A pair with an empty side (a line the tokenizer turned into no tokens) carries no translation signal: it is
    skipped and counted in `skipped_empty_side`. A dataset with no usable pair at all is a DataError at start-up,
    not an endless loop."""

    def __init__(self, dataset, key: str, seed: int):
        self.ds, self.key = dataset, key
        self.src, self.tgt = IdColumn(dataset, "src_ids"), IdColumn(dataset, "tgt_ids")
        self.order = ShuffledOrder(len(dataset), key, seed, data_dir(dataset))
        self.usable = int(((self.src.lengths() > 0) & (self.tgt.lengths() > 0)).sum())
        if not self.usable:
            raise DataError(dataset_path(dataset, key), None,
                            f"parallel data {key}: all {len(dataset)} pairs have an empty side after tokenization")
        self.skipped_empty_side = 0

    def next_pair(self) -> tuple[list[int], list[int]]:
        while True:
            i = self.order.next_index()
            src, tgt = self.src.row(i), self.tgt.row(i)
            if src and tgt:
                return src, tgt
            self.skipped_empty_side += 1

    def state_dict(self) -> dict:
        return {"epoch": self.order.epoch, "pos": self.order.pos, "skipped_empty_side": self.skipped_empty_side}

    def load_state_dict(self, state: dict) -> None:
        self.order.epoch, self.order.pos = state["epoch"], state["pos"]
        self.skipped_empty_side = state["skipped_empty_side"]
