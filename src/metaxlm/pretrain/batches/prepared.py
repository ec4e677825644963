"""Reading a run's prepared data (`data prepare` output) and the fixed held-out sequences."""

from __future__ import annotations

from pathlib import Path

import torch


def load_prepared(prepared_dir: str | Path, kind: str = "mono", keys: list[str] | None = None) -> dict:
    """The datasets under prepared/<kind>/ (kind: mono, parallel or heldout), key → Dataset; {} when none."""
    import datasets

    root = Path(prepared_dir) / kind
    if not root.is_dir():
        return {}
    names = sorted(p.name for p in root.iterdir() if p.is_dir())
    return {k: datasets.load_from_disk(str(root / k)) for k in names if keys is None or k in keys}


def fixed_eval_batches(dataset, *, seq_len: int, max_sequences: int, bos_id: int, eos_id: int) -> torch.Tensor:
    """Held-out text packed in file order (no sampling): the same sequences at every evaluation."""
    rows, seq = [], [bos_id]
    for ids in dataset["input_ids"]:
        buf = list(ids) + [eos_id]
        while buf:
            take = seq_len - len(seq)
            seq.extend(buf[:take])
            buf = buf[take:]
            if len(seq) == seq_len:
                rows.append(seq)
                seq = [bos_id]
                if len(rows) == max_sequences:
                    return torch.tensor(rows, dtype=torch.long)
    return torch.tensor(rows, dtype=torch.long).reshape(-1, seq_len)
