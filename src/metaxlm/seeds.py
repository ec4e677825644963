"""Every random stream of a run is seeded from the run's seed and what the stream is for: one derivation for all.

`derive_seed(seed, *keys)` = seed × SEED_STRIDE + the keys folded base 1009 (an int key as it is, a text key by its
CRC-32): (step,) → step, (step, rank) → step × 1009 + rank, ("tlm",) → crc32("tlm"). The stride is a prime above
any step count a run reaches, so streams of different run seeds do not meet. Users: the engine (each step's batch
and mask generator, and dropout per step and rank), the objectives (each one's initialization), the data streams.
"""

from __future__ import annotations

import zlib

SEED_STRIDE = 1_000_003
KEY_BASE = 1009


def derive_seed(seed: int, *keys: int | str) -> int:
    offset = 0
    for key in keys:
        offset = offset * KEY_BASE + (zlib.crc32(key.encode()) if isinstance(key, str) else int(key))
    return seed * SEED_STRIDE + offset


def position_weighted_key(text: str) -> int:
    """The data streams' key of a language or pair name, Σ (position + 1) × code point: an older key than CRC-32,
    kept so that the streams (and every result computed from them) stay as they were."""
    return sum((i + 1) * ord(c) for i, c in enumerate(text))
