"""`metaxlm configs list|copy|reference`: the configs shipped in the package (metaxlm.packaged), as torchtune's
`tune ls` / `tune cp` show and copy its recipes' configs, and the config reference generated from the schema."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from metaxlm import packaged
from metaxlm.errors import ConfigError


def cmd_configs_list(args) -> None:
    for kind in packaged.KIND_DIRS:
        names = packaged.names(kind)
        width = max(map(len, names), default=0)
        print(f"{packaged.KIND_TITLES[kind]}:")
        for name in names:
            print(f"  {name:<{width}}  {packaged.description(packaged.packaged(kind, name))}")
        print()
    print("`metaxlm configs copy NAME [DIR]` writes NAME.yaml to edit; `metaxlm run NAME` runs a packaged config as "
          "it is (its outputs go under the working directory).")


# what to do with a copy, by kind
USE = {"run": "metaxlm run {path}", "task": "metaxlm finetune {path} --model MODEL_DIR --out OUT_DIR",
       "accelerate": "accelerate launch --config_file {path} -m metaxlm.cli pretrain CONFIG"}


def find_any(name: str) -> tuple[packaged.Kind, Path]:
    """The packaged config `name` of whatever kind (names are unique across kinds: tests/test_configs_cli.py)."""
    for kind in packaged.KIND_DIRS:
        if (found := packaged.packaged(kind, name)) is not None:
            return kind, found
    every = [n for kind in packaged.KIND_DIRS for n in packaged.names(kind)]
    raise ConfigError(f"no packaged config {name!r} (packaged: {', '.join(every)}; `metaxlm configs list` "
                      "describes them)")


def cmd_configs_copy(args) -> None:
    kind, source = find_any(args.name)
    if Path(args.dir).exists() and not Path(args.dir).is_dir():
        raise ConfigError(f"{args.dir} is not a directory: give the directory to write {source.name} into")
    target = Path(args.dir) / source.name
    if target.exists():
        raise ConfigError(f"{target} already exists: not overwritten (remove it, or copy into another directory)")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    print(f"wrote {target} (edit it, then: {USE[kind].format(path=target)})")


def cmd_configs_reference(args) -> None:
    from metaxlm.config_reference import reference_markdown

    print(reference_markdown(plugins=args.plugin or []))


def register(sub: argparse._SubParsersAction) -> None:
    """Add `metaxlm configs ...` to the CLI's subcommands."""
    configs = sub.add_parser("configs", help="the configs shipped with metaxlm: list, copy one out to edit, reference")
    csub = configs.add_subparsers(dest="configs_command", required=True)
    p = csub.add_parser("list", help="the packaged run configs, tasks and launch configs, each with its description")
    p.set_defaults(func=cmd_configs_list)
    p = csub.add_parser("copy", help="write a packaged config (run config, task or launch config) to edit")
    p.add_argument("name", help="a name from `metaxlm configs list` (with or without .yaml)")
    p.add_argument("dir", nargs="?", default=".", help="the directory to write NAME.yaml into (default: the "
                                                       "working directory; an existing file is not overwritten)")
    p.set_defaults(func=cmd_configs_copy)
    p = csub.add_parser("reference", help="print the config reference (every key of a run config and a task "
                                          "config: type, default, meaning) as Markdown")
    p.add_argument("--plugin", action="append", metavar="MODULE",
                   help="a plugin module or .py file whose objectives and architectures are listed too (repeatable)")
    p.set_defaults(func=cmd_configs_reference)
