from pathlib import Path

import pytest

from tools.translation_controls import main

FOLDER = Path(__file__).resolve().parents[2] / "docs" / "results" / "translation" / "with-controls"


def _cells(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("| ") and "−" in line and "A − B" not in line]


def test_a_row_against_itself_is_zero_and_the_order_flips_the_sign(capsys):
    same = "start/mt_start_encoder - start/mt_start_encoder"
    pair = "mlm_control/mt_mlm_encoder - start/mt_start_encoder"
    flipped = "start/mt_start_encoder - mlm_control/mt_mlm_encoder"
    assert main([str(FOLDER), "--language", "de", same, pair, flipped]) == 0
    rows = _cells(capsys.readouterr().out)
    assert len(rows) == 3
    assert rows[0].split(" | ")[1].startswith("+0.0 [")  # (its interval: both sides' seeds, as two models' would be)
    ahead = rows[1].split(" | ")[1].split(" ")[0]
    behind = rows[2].split(" | ")[1].split(" ")[0]
    assert float(ahead) == -float(behind) and float(ahead) > 0  # the MLM control above the start (docs/veco.md)
    assert "(items and seeds)" in rows[1]


def test_bad_rows_end_in_one_line():
    with pytest.raises(SystemExit, match="write a pair as"):
        main([str(FOLDER), "--language", "de", "start/mt_start_encoder"])
    with pytest.raises(SystemExit, match="no task 'nope'"):
        main([str(FOLDER), "--language", "de", "start/nope - start/mt_start_encoder"])
    with pytest.raises(SystemExit, match="not found"):
        main([str(FOLDER), "--language", "de", "ghost/x - start/mt_start_encoder"])
