"""What every run records beside its outputs: the resolved config, package versions and the git commit."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from pydantic import BaseModel

from metaxlm.config import dump_config
from metaxlm.io import atomic_write_json
from metaxlm.run.layout import RunDir

PACKAGES = ("metaxlm", "torch", "transformers", "tokenizers", "sentencepiece", "datasets", "pyarrow", "numpy")



# -- the machine -------------------------------------------------------------------------------------------
CPUINFO = Path("/proc/cpuinfo")


def cpu_model(cpuinfo: Path = CPUINFO) -> str:
    """The CPU's model name (/proc/cpuinfo on Linux) with its family and model numbers where the file gives them,
    e.g. "AMD EPYC (family 23, model 1)": a virtual machine may show only "AMD EPYC" for CPUs whose speed differs
    twofold; else what platform knows."""
    try:
        fields: dict[str, str] = {}
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if not line.strip() and fields:  # the first processor's block is enough
                break
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
        if name := fields.get("model name"):
            family, model = fields.get("cpu family"), fields.get("model")
            return f"{name} (family {family}, model {model})" if family and model else name
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def cpu_bf16_flags() -> list[str]:
    """The CPU flags that make bf16 matmuls fast (a VM may hide some on the same model name)."""
    try:
        for line in CPUINFO.read_text(errors="replace").splitlines():
            if line.startswith(("flags", "Features")):
                return sorted(f for f in line.split(":", 1)[1].split() if "bf16" in f or f.startswith("amx"))
    except OSError:
        pass
    return []

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
    dump_config(config, RunDir(out).config)
    atomic_write_json(RunDir(out).run_info, {
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "argv": list(sys.argv if argv is None else argv),
        "versions": package_versions(),
        "git": git_commit(),
        "platform": platform.platform(),
        "cpu": {"model": cpu_model(), "cores": os.cpu_count()},
    })


def finish_run_info(output_dir: str | Path, stage_seconds: dict[str, float]) -> None:
    """Add the wall time (per stage and in all) of the invocation that just finished to run_info.json."""
    path = RunDir(Path(output_dir)).run_info
    info = json.loads(path.read_text()) if path.exists() else {}
    info["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
    info["stage_seconds"] = {name: round(s, 1) for name, s in stage_seconds.items()}
    info["wall_seconds"] = round(sum(stage_seconds.values()), 1)
    atomic_write_json(path, info)
