"""results.json's typed records (metaxlm.records), shared by the writers and the report: a writer cannot write a file
the report would reject, and each wrong key is named with the file."""

from __future__ import annotations

import json
import math

import pytest

from metaxlm.errors import DataError
from metaxlm.records import check_results, write_results


def test_a_writer_cannot_write_what_the_report_would_reject(tmp_path):
    good = {"model_name": "m", "step": 3,
            "tasks": {"t": {"type": "own_type", "own_score": [1, 2],  # keys a task type adds are kept
                            "per_language": {"de": {"mean": math.nan, "std": None, "runs": [math.nan]}}}}}
    path = write_results(tmp_path / "results.json", good)
    written = json.loads(path.read_text())
    assert written["tasks"]["t"]["per_language"]["de"] == {"mean": None, "std": None, "runs": [None]}  # NaN: null
    assert written["tasks"]["t"]["own_score"] == [1, 2] and check_results(written, path) == written

    bad = {"model_name": "m", "tasks": {"t": {"per_language": {"de": {"mean": "high"}}}}}
    with pytest.raises(DataError, match=r"bad\.json: tasks\.t\.per_language\.de\.mean: expected a number or null"):
        write_results(tmp_path / "bad.json", bad)
    assert not (tmp_path / "bad.json").exists()


@pytest.mark.parametrize(("results", "message"), [
    ({"tasks": {}}, r"model_name: Field required"),
    ({"model_name": ""}, r"model_name: String should have at least 1 character"),
    ({"model_name": "m", "step": True}, r"step: Input should be a valid integer"),
    ({"model_name": "m", "transfer_matrix": {"t": {"languages": ["en", "de"], "scores": [[1, 2], [3]]}}},
     r"transfer_matrix\.t\.scores\[1\]: expected 2 columns"),
    ({"model_name": "m", "retrieval": {"r": {"layers": [], "average": []}}}, r"retrieval\.r\.layers"),
    ({"model_name": "m", "retrieval": {"r": {"layers": [0, 1], "average": [0.5]}}},
     r"retrieval\.r\.average: has 1 values for 2 layers"),
    ({"model_name": "m", "alignment": {"a": {"layers": [0, 1], "test": {"aer": [0.3, 0.2]}, "chosen_layer": 1,
                                             "chosen_on": "dev"}}}, r"alignment\.a\.dev: a layer chosen on dev"),
    ({"model_name": "m", "alignment": {"a": {"layers": [0, 1], "aer": [0.3]}}}, r"alignment\.a.*aer: has 1 values"),
])
def test_each_wrong_key_is_named(tmp_path, results, message):
    with pytest.raises(DataError, match=message):
        check_results(results, tmp_path / "results.json")
