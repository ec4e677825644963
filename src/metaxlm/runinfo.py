"""What every run records beside its outputs: the resolved config, package versions and the git commit."""

from __future__ import annotations

import platform
import subprocess
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from pydantic import BaseModel

from metaxlm.config import dump_config
from metaxlm.io import atomic_write_json

PACKAGES = ("metaxlm", "torch", "transformers", "tokenizers", "sentencepiece", "datasets", "pyarrow", "numpy")


def package_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def git_commit(cwd: Path | None = None) -> dict[str, str | bool | None]:
    """Commit of the source tree metaxlm runs from (falls back to the working directory), and whether it is dirty."""
    here = cwd or Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, check=True)
        return {"commit": sha.stdout.strip(), "dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None}


def write_run_info(output_dir: str | Path, config: BaseModel, argv: list[str] | None = None) -> None:
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    dump_config(config, out / "config.yaml")
    atomic_write_json(out / "run_info.json", {
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "argv": list(sys.argv if argv is None else argv),
        "versions": package_versions(),
        "git": git_commit(),
        "platform": platform.platform(),
    })
