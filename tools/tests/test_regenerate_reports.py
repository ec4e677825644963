"""Every published report under docs/results/ equals what today's report code makes from its committed results."""

import json
import shutil
from pathlib import Path

import pytest

from tools.regenerate_reports import differences, main, published_runs

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = published_runs(ROOT / "docs/results")


def test_every_published_run_is_checked():
    names = {p.name for p in PUBLISHED}
    assert {"compare", "compare-from-metaxlm", "reproduce-metaxlm", "ppa", "code-switching", "translation",
            "veco", "xlm-align"} <= names


@pytest.mark.parametrize("published", PUBLISHED, ids=lambda p: p.name)
def test_committed_report_is_what_the_current_code_makes(published):
    problems = differences(published)
    assert not problems, ("\n".join(problems) + "\n\nregenerate with `python -m tools.regenerate_reports` and list "
                                               "the verdicts that changed in the commit")


def _copy(name: str, tmp_path: Path) -> Path:
    out = tmp_path / name
    shutil.copytree(ROOT / "docs/results" / name, out, ignore=shutil.ignore_patterns("figures", "finished-runs"))
    return out


def test_a_changed_result_or_a_hand_edit_is_caught(tmp_path):
    run = _copy("reproduce-metaxlm", tmp_path)  # as committed: test_committed_report_is_what_the_current_code_makes
    report = run / "report.md"
    report.write_text(report.read_text().replace("inconclusive", "reproduced", 1))  # a verdict edited by hand
    assert any("report.md: differs" in p for p in differences(run))
    assert main([str(run)]) == 0 and differences(run) == []  # regenerated in place
    path = run / "results.metaxlm.json"
    data = json.loads(path.read_text())
    data["tasks"]["spans"]["target_average"]["mean"] += 0.05  # a result changed without its report
    path.write_text(json.dumps(data))
    assert main([str(run), "--check"]) == 1
    problems = differences(run)
    assert any("report.md" in p for p in problems) and any("findings.json" in p for p in problems)


def test_the_report_shows_when_results_were_written_not_the_copys_time(tmp_path):
    run = _copy("ppa", tmp_path)
    written = json.loads((run / "results.ppa.json").read_text())["written"]
    assert f"(model ppa; written {written})" in (run / "report.md").read_text()
