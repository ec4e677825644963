"""bench/align_peers.py's grow-diag-final-and (eflomal's symmetrization) on hand-computed cases."""

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "align_peers.py"
spec = importlib.util.spec_from_file_location("align_peers", SCRIPT)
align_peers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(align_peers)  # top-level imports are stdlib only: cheap


def test_grow_adds_union_neighbours_that_link_an_unaligned_word():
    fwd = {(0, 0), (1, 1), (2, 1), (3, 3)}
    rev = {(0, 0), (1, 1), (1, 2), (3, 3)}
    # intersection {(0,0),(1,1),(3,3)}; (2,1) and (1,2) neighbour (1,1) and link source 2 / target 2
    assert align_peers.grow_diag_final_and(fwd, rev, 4, 4) == fwd | rev


def test_final_and_needs_both_words_unaligned():
    fwd = {(0, 0), (1, 0), (3, 3)}
    rev = {(0, 0), (0, 2)}
    # grow: (1,0) neighbours (0,0) and source 1 is unaligned -> added.
    # final-and: (3,3) links two unaligned words -> added; (0,2) is not a neighbour of an aligned point and
    # source 0 is aligned -> left out (grow-diag-final without "and" would add it).
    assert align_peers.grow_diag_final_and(fwd, rev, 4, 4) == {(0, 0), (1, 0), (3, 3)}


def test_diagonal_growth_and_no_growth_from_union_only_points():
    fwd = {(0, 0), (1, 1), (3, 2)}
    rev = {(0, 0), (2, 2), (3, 2)}
    # intersection {(0,0),(3,2)}; (1,1) is a diagonal neighbour of (0,0) -> added; then (2,2) is a diagonal
    # neighbour of (1,1) and adjacent to (3,2), source 2 unaligned -> added.
    assert align_peers.grow_diag_final_and(fwd, rev, 4, 3) == {(0, 0), (1, 1), (2, 2), (3, 2)}
    # with disjoint directions the intersection is empty: nothing to grow from, final-and adds forward first
    assert align_peers.grow_diag_final_and({(0, 0)}, {(0, 1)}, 1, 2) == {(0, 0)}


def test_parse_pharaoh(tmp_path):
    path = tmp_path / "links"
    path.write_text("0-0 2-1\n\n1-0\n", encoding="utf-8")
    assert align_peers.parse_pharaoh(path) == [{(0, 0), (2, 1)}, set(), {(1, 0)}]
