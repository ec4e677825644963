"""The configs shipped inside the package, found by name wherever metaxlm is installed.

`metaxlm/configs/` holds the example run configs (`*.yaml`), the task definitions (`tasks/*.yaml`) and the
`accelerate launch` configs (`accelerate/*.yaml`); a checkout's `configs/` is a link to it. A command that takes a
config takes a file path (used as written) or a packaged name, with or without `.yaml`: `metaxlm run demo`,
`metaxlm finetune sib200`. `metaxlm configs list|copy` (metaxlm.cli_configs) show and copy them.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Literal

from metaxlm.errors import ConfigError

Kind = Literal["run", "task", "accelerate"]
CONFIGS_DIR = Path(str(files("metaxlm").joinpath("configs")))
KIND_DIRS: dict[Kind, Path] = {"run": CONFIGS_DIR, "task": CONFIGS_DIR / "tasks",
                               "accelerate": CONFIGS_DIR / "accelerate"}
KIND_TITLES: dict[Kind, str] = {"run": "run configs (metaxlm run NAME, plan, evaluate, ...)",
                                "task": "tasks (metaxlm finetune NAME; a run config's evaluate.tasks.<name>.task)",
                                "accelerate": "launch configs (accelerate launch --config_file FILE -m metaxlm.cli "
                                              "pretrain ...)"}


def names(kind: Kind) -> list[str]:
    """The packaged configs of a kind, by name (the file stem), sorted."""
    return sorted(path.stem for path in KIND_DIRS[kind].glob("*.yaml"))


def packaged(kind: Kind, name: str) -> Path | None:
    """The packaged config `name` (with or without .yaml) of a kind, or None."""
    stem = name.removesuffix(".yaml")
    if "/" in stem or "\\" in stem or stem not in names(kind):
        return None
    return KIND_DIRS[kind] / f"{stem}.yaml"


def find_config(path_or_name: str | Path, kind: Kind = "run") -> Path:
    """An existing file as it is (a FIFO or /dev/stdin too), else the packaged config of that name; else a
    ConfigError listing the names."""
    path = Path(path_or_name)
    if path.exists() and not path.is_dir():
        return path
    if (found := packaged(kind, str(path_or_name))) is not None:
        return found
    what = "task config" if kind == "task" else "config"
    raise ConfigError(f"no {what} {str(path_or_name)!r}: not a file, nor a packaged {what} (packaged: "
                      f"{', '.join(names(kind))}; `metaxlm configs list` describes them)")


def description(path: Path) -> str:
    """A config's one-line description: the text of its first comment line ('…' where its sentence goes on)."""
    for line in path.read_text(encoding="utf-8").splitlines():
        text = line.strip()
        if text.startswith("#"):
            text = text.lstrip("#").strip()
            return text if text.endswith((".", ")", ":")) else f"{text} …"
        if text:
            break
    return ""
