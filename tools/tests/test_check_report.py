"""tools/check_report.py: a report opened in real headless Chromium (skipped when Chromium is not installed)."""

import json
import struct
from pathlib import Path

import pytest

from metaxlm.report.evaluation import write_report
from tools.check_report import DEFAULT_CHROMIUM, check_report, main

needs_chromium = pytest.mark.skipif(not Path(DEFAULT_CHROMIUM).exists(),
                                    reason=f"needs Chromium at {DEFAULT_CHROMIUM} (`apt-get install chromium`, "
                                           "or `make check-report`, installs it)")


def _tiny_report(root: Path) -> Path:
    """Two models with task scores and retrieval curves: a table, bars and layer curves."""
    for name, score in (("xlm", 0.6), ("metaxlm", 0.7)):
        stat = {"mean": score, "std": 0.01, "runs": [score - 0.01, score + 0.01]}
        results = {"model_name": name, "variant": name, "step": 100,
                   "tasks": {"xnli": {"type": "classification", "metric": "accuracy", "source": "en", "seeds": [0, 1],
                                      "per_language": {"en": stat, "de": stat}}},
                   "retrieval": {"tatoeba": {"layers": [0, 1, 2], "average": [0.2, score, 0.5]}}}
        path = root / "run" / "eval" / name / "results.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(results))
    return write_report([root / "run"])["html"]


@needs_chromium
def test_a_report_passes_and_has_a_screenshot(tmp_path):
    report = _tiny_report(tmp_path)
    findings = check_report(report, screenshot=tmp_path / "shot.png", width=1000)
    assert findings["problems"] == []
    assert findings["images"] == findings["figures"] == 2  # task bars, retrieval curves
    png = (tmp_path / "shot.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", png[16:24])[0] == 1000  # the window's width; as tall as the page


@needs_chromium
def test_wide_tables_fit_the_page(tmp_path):
    """Fifteen languages (the demo's) of "mean ± std" cells and long text cells (the findings table) wrap to the
    1,100 px page instead of scrolling sideways."""
    from metaxlm.report.document import Section, Table
    from metaxlm.report.html import render_html

    langs = [f"l{i:02d}" for i in range(15)]
    scores = Table(["model", *langs], [[m, *(["61.0 ± 10.4"] * 15)] for m in ("xlm", "metaxlm")])
    claim = "zero-shot transfer: MetaXLM above XLM at every layer of every set " * 2
    text = Table(["finding", "paper", "this run", "verdict"],
                 [[claim, "Table 5: 59.4 vs 50.2 (mean of XQuAD, MLQA, TyDiQA, XNLI, PAWS-X)",
                   "MetaXLM gap 19.9 ± 7.2 → 22.4 ± 7.2 (step 80 → 240): falls inconclusive", "inconclusive"]],
                 text_columns=4)
    page = tmp_path / "wide.html"
    page.write_text(render_html("wide", [Section("tables", [scores, text])], tmp_path), encoding="utf-8")
    findings = check_report(page, width=1280)
    assert findings["problems"] == [] and not [w for w in findings["warnings"] if "scrolls sideways" in w]


@needs_chromium
def test_each_problem_is_listed(tmp_path, capsys):
    page = tmp_path / "bad.html"
    page.write_text("""<!DOCTYPE html><html><head><style>body, figure { margin: 0 }</style></head><body>
<figure><img src="data:image/png;base64,AAAA" alt="broken"><figcaption>a broken image</figcaption></figure>
<figure><img style="width:1400px" alt="wide" src="data:image/gif;base64,R0lGODlhAQABAAAAACwAAAAAAQABAAACAkQBADs=">
<figcaption>too wide</figcaption></figure>
<figure><img alt="uncaptioned" src="data:image/gif;base64,R0lGODlhAQABAAAAACwAAAAAAQABAAACAkQBADs="></figure>
<figure><img alt="hidden caption" src="data:image/gif;base64,R0lGODlhAQABAAAAACwAAAAAAQABAAACAkQBADs=">
<figcaption style="display:none">hidden</figcaption></figure>
</body></html>""")
    assert main([str(page), "--width", "800"]) == 1
    out = capsys.readouterr().out
    assert "5 problem(s)" in out, out
    assert "image 1 (a broken image): did not load" in out
    assert "image 2 (too wide): shown 1400 px wide in a" in out
    assert 'the page is 1400 px wide in a 800 px window (scrolls sideways); too wide: <img> "wide"' in out
    assert "figure 3 (uncaptioned): no caption" in out
    assert "figure 4 (hidden caption): its caption is not visible" in out


def test_a_missing_report_is_a_clear_error(tmp_path, capsys):
    assert main([str(tmp_path / "nope.html")]) == 2
    assert f"{tmp_path / 'nope.html'}: no such file" in capsys.readouterr().err
