"""One seed derivation for every random stream of a run (metaxlm.seeds), equal to what each stream used before, so
every committed result reproduces."""

import zlib

import pytest

from metaxlm.seeds import derive_seed, position_weighted_key


@pytest.mark.parametrize("seed", [0, 1, 7, 12345])
def test_derive_seed_is_each_stream_s_earlier_formula(seed):
    for step in (0, 1, 99, 40_000):
        assert derive_seed(seed, step) == seed * 1_000_003 + step  # the engine's per-step batch generator
        for rank in (0, 1, 7):
            assert derive_seed(seed, step, rank) == seed * 1_000_003 + step * 1009 + rank  # dropout per step, rank
    for name in ("mlm", "tlm", "moco", "veco_segments", ""):
        assert derive_seed(seed, name) == seed * 1_000_003 + zlib.crc32(name.encode())  # an objective's init
    for key in ("en", "de", "en-de", "zh"):  # a data stream
        assert derive_seed(seed, position_weighted_key(key)) == \
            seed * 1_000_003 + sum((i + 1) * ord(c) for i, c in enumerate(key))


def test_derived_seeds_differ_by_purpose_and_seed():
    seeds = {derive_seed(s, *keys) for s in range(3) for keys in [(1,), (2,), (1, 0), (1, 1), ("mlm",), ("tlm",)]}
    assert len(seeds) == 18
