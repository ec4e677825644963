"""The command line both builders share (`python -m tools.demo_bundle`, `python -m tools.large_corpora`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tools.cli import run_builder
from tools.fetch import FetchError

REPO = Path(__file__).resolve().parents[2]


def test_run_builder_passes_paths_and_progress(tmp_path, capsys):
    calls = []

    def build(out, cache, *, progress):
        calls.append((out, cache, progress))
        return {}

    status = run_builder("prog", "test", build, "default/out", ["--out", str(tmp_path / "o"), "--cache",
                                                                 str(tmp_path / "c"), "--no-progress"])
    assert status == 0 and calls == [(tmp_path / "o", tmp_path / "c", False)]
    assert f"built {tmp_path / 'o'}" in capsys.readouterr().out
    run_builder("prog", "test", build, "default/out", [])
    assert calls[-1] == (Path("default/out"), Path(".cache/registry"), True)


def test_run_builder_reports_a_fetch_error_in_one_line(capsys):
    def build(out, cache, *, progress):
        raise FetchError("cannot fetch Debian package 'x': `apt-get download x` failed: E: no such package")

    assert run_builder("prog", "test", build, "out", []) == 2
    err = capsys.readouterr().err
    assert err == "prog: error: cannot fetch Debian package 'x': `apt-get download x` failed: E: no such package\n"


def test_modules_run_from_the_repository_root():
    for module in ("tools.demo_bundle", "tools.large_corpora"):
        out = subprocess.run([sys.executable, "-m", module, "--help"], cwd=REPO, capture_output=True, text=True)
        assert out.returncode == 0 and f"usage: python -m {module}" in out.stdout, out.stderr
