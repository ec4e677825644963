"""The documentation site builds with --strict (a broken link, anchor or image, or a page missing from docs/,
fails), its config reference covers the whole schema, and the README stays the front door (issue 27)."""

import os
import subprocess
import sys
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from metaxlm.config import RunConfig
from metaxlm.finetune.spec import TaskSpec

ROOT = Path(__file__).resolve().parents[1]
README_MAX_LINES = 250


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("docs") / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's end-of-life notice, not a build problem
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                            str(ROOT / "mkdocs.yml"), "--site-dir", str(out)],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, f"mkdocs build --strict failed:\n{build.stderr[-5000:]}"
    return out


def test_docs_build_strictly(site):
    for page in ("index", "architecture", "metaxlm", "xlm-align", "ppa", "veco", "config-reference"):
        assert (site / f"{page}.html").is_file(), page


def _models_in(annotation, suffix: str = ""):
    """(key suffix, model) of each model a field's type holds: directly, as dict values or as list items."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield suffix, annotation
    elif origin is dict:
        yield from _models_in(args[1], suffix + ".<name>")
    else:  # a union (`X | None`), a list or a tuple
        for arg in args:
            yield from _models_in(arg, suffix + ("[]" if origin in (list, tuple) else ""))


def _keys(model: type[BaseModel], path: str = "") -> list[str]:
    """Every key path of `model`, `<name>` standing for a key of your choosing."""
    keys = []
    for name, field in model.model_fields.items():
        key = f"{path}.{name}" if path else name
        keys.append(key)
        for suffix, inner in _models_in(field.annotation):
            keys += _keys(inner, key + suffix)
    return keys


def test_config_reference_lists_every_key(site):
    page = (site / "config-reference.html").read_text(encoding="utf-8")
    for key in _keys(RunConfig) + _keys(TaskSpec):
        assert f"<code>{key.replace('<', '&lt;').replace('>', '&gt;')}</code>" in page, key
    # a field's comment in the source reaches its row
    assert "held-out sequences per language" in page


def test_readme_is_the_front_door():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, \
        f"README.md has {len(lines)} lines (at most {README_MAX_LINES}): long material goes into a docs/ page"


def _tables(text: str) -> list[str]:
    """Every markdown table in `text`, each as its lines joined."""
    tables, current = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append("\n".join(current))
            current = []
    return tables


def test_comparison_tables_are_the_committed_reports():
    """docs/comparison.md copies its run sections' tables from the published reports: a rerun that is not copied over
    (or a number edited by hand) fails here, not in a reader's hands."""
    sections = (ROOT / "docs/comparison.md").read_text(encoding="utf-8").split("\n## ")
    runs = {"configs/compare.yaml": "compare", "configs/compare-from-metaxlm.yaml": "compare-from-metaxlm"}
    checked = 0
    for section in sections:
        heading = section.splitlines()[0]
        run = next((name for config, name in runs.items() if f"({config})" in heading), None)
        if run is None:
            continue
        report = (ROOT / "docs/results" / run / "report.md").read_text(encoding="utf-8")
        for table in _tables(section):
            assert table in report, (f"a table in docs/comparison.md's '{heading}' is not in "
                                     f"docs/results/{run}/report.md")
            checked += 1
    assert checked >= 4
