"""A pip-installed metaxlm has its configs, task definitions and demo data (issue 64): the wheel built from this tree,
installed in a fresh virtualenv outside the repository, lists its configs, copies one out and runs it from a
directory that is not a checkout. The dependencies come from this project's virtualenv through a `.pth` line (a
plain path: the editable install's own .pth there is not run, so `metaxlm` can only come from the wheel)."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WHEEL_SOURCES = ("pyproject.toml", "README.md", "LICENSE", "src")  # pyproject.toml names the readme and license


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 120) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))} failed ({done.returncode}):\n{done.stderr[-4000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """(the new virtualenv's bin/, the environment to run it in)."""
    tmp = tmp_path_factory.mktemp("wheel")
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    # built from a copy of what the wheel is made of: setuptools would reuse a checkout's stale build/ and egg-info
    # (their file lists from an earlier build), and two builds at once would share them
    source = tmp / "source"
    source.mkdir()
    for name in WHEEL_SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(ROOT / name, source / name)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", str(source), "-w",
          str(tmp / "dist")], cwd=tmp, env=env, timeout=300)
    (wheel,) = (tmp / "dist").glob("metaxlm-*.whl")
    target = tmp / "venv"
    venv.create(target, with_pip=False)
    bin_dir = target / "bin"
    _run([sys.executable, "-m", "pip", "--python", str(bin_dir / "python"), "install", "--no-deps", "-q", str(wheel)],
         cwd=tmp, env=env)
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(target), "platbase": str(target)}))
    (purelib / "project_dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return bin_dir, env


@pytest.mark.slow  # ~60 s: the wheel built, installed and its quickstart run (conftest.LONG_FIRST schedules it first)
def test_the_installed_wheel_lists_copies_and_runs_its_configs(installed, tmp_path):
    bin_dir, env = installed
    work = tmp_path / "elsewhere"  # not a checkout: no configs/ or data/ beside it
    work.mkdir()
    where = _run([str(bin_dir / "python"), "-c", "import metaxlm; print(metaxlm.__file__)"], cwd=work, env=env)
    assert Path(where.strip()).is_relative_to(bin_dir.parent), where  # the wheel's copy, not the checkout's
    listed = _run([str(bin_dir / "metaxlm"), "configs", "list"], cwd=work, env=env)
    for name in ("quickstart", "demo", "sib200", "demo_module"):
        assert f"  {name} " in listed, name
    _run([str(bin_dir / "metaxlm"), "configs", "copy", "quickstart", "."], cwd=work, env=env)
    assert (work / "quickstart.yaml").is_file()
    # the copy as it is, from a directory that is not the checkout: its demo data comes with the package
    _run([str(bin_dir / "metaxlm"), "run", "quickstart.yaml", "--no-progress"], cwd=work, env=env, timeout=300)
    run = work / "runs" / "quickstart"
    assert (run / "eval" / "xlm" / "results.json").is_file()
    assert (run / "report" / "report.html").is_file() and (run / "report" / "report.md").is_file()
