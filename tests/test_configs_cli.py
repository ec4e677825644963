"""The configs shipped in the package, found by name (issue 64): `metaxlm run NAME` / `finetune NAME`, `metaxlm configs
list|copy|reference`, `metaxlm run` without a config, and packaged configs whose data paths do not depend on the
working directory. The installed wheel is tests/test_wheel.py's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from metaxlm import packaged
from metaxlm.cli import _load, build_parser, main
from metaxlm.config import load_config
from metaxlm.errors import ConfigError
from metaxlm.finetune.spec import load_task_spec
from metaxlm.roots import demo_root

ROOT = Path(__file__).resolve().parents[1]


def test_configs_live_in_the_package_and_the_checkout_links_to_them():
    package = ROOT / "src" / "metaxlm"
    assert packaged.CONFIGS_DIR.resolve() == (package / "configs").resolve()
    assert Path(demo_root()).resolve() == (package / "demo_data").resolve()
    # every existing path (tests, docs, Makefile) still works in a checkout
    assert (ROOT / "configs").resolve() == (package / "configs").resolve()
    assert (ROOT / "data" / "demo").resolve() == (package / "demo_data").resolve()


def test_names_are_unique_across_kinds():
    """`metaxlm configs copy NAME` takes a name of any kind: no name may stand for two files."""
    every = [name for kind in packaged.KIND_DIRS for name in packaged.names(kind)]
    assert len(every) == len(set(every))
    assert {"demo", "quickstart"} <= set(packaged.names("run"))
    assert {"sib200", "demo_module"} <= set(packaged.names("task"))


def test_a_file_is_used_as_it_is_else_a_packaged_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert packaged.find_config("demo") == packaged.CONFIGS_DIR / "demo.yaml"
    assert packaged.find_config("demo.yaml") == packaged.CONFIGS_DIR / "demo.yaml"
    assert packaged.find_config("sib200", kind="task") == packaged.CONFIGS_DIR / "tasks" / "sib200.yaml"
    (tmp_path / "demo.yaml").write_text("output_dir: mine\ndata: {languages: [en]}\n")
    assert packaged.find_config("demo.yaml") == Path("demo.yaml")  # the user's own file wins over the name
    assert load_config(packaged.find_config("demo.yaml")).output_dir == "mine"
    with pytest.raises(ConfigError, match=r"no config 'demoo': not a file, nor a packaged config \(packaged: .*"
                                          r"quickstart.*`metaxlm configs list`"):
        packaged.find_config("demoo")
    with pytest.raises(ConfigError, match="no task config 'tasks/sib200'"):  # a name, not a path into the package
        packaged.find_config("tasks/sib200", kind="task")


def test_run_and_finetune_find_packaged_configs_by_name(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    # every config command reads its config through _load
    args = build_parser().parse_args(["run", "quickstart", "train.steps=3"])
    assert _load(args).train.steps == 3 and args.config == "quickstart"
    assert _load(build_parser().parse_args(["evaluate", "demo.yaml"])).output_dir == "runs/demo"
    assert main(["run", "no_such_config"]) == 2
    assert "no config 'no_such_config': not a file, nor a packaged config" in capsys.readouterr().err
    # the task is found by name: the error is about the language given, after the task was read
    assert main(["finetune", "demo_module", "--model", "m", "--out", "o", "--languages", "pt"]) == 2
    assert "task demo_module has no data for 'pt'" in capsys.readouterr().err
    assert main(["finetune", "no_such_task", "--model", "m", "--out", "o"]) == 2
    assert "no task config 'no_such_task'" in capsys.readouterr().err


def test_packaged_configs_read_the_demo_data_from_any_directory(tmp_path, monkeypatch):
    """A copied or packaged config runs from anywhere: its demo paths go through the `{demo}` root, none is
    relative to a checkout (`data/demo/...` would resolve against the working directory)."""
    monkeypatch.chdir(tmp_path)
    for name in packaged.names("run"):
        cfg = load_config(packaged.find_config(name))
        paths = [p for spec in cfg.data.mono_corpora().values()
                 for p in ([spec.path] if isinstance(spec.path, str) else spec.path)]
        paths += [spec.path for spec in cfg.data.parallel_corpora().values()]
        assert not [p for p in paths if "data/demo" in p], name
        for path in paths:
            if path.startswith(demo_root()):
                assert Path(path).is_file(), (name, path)
    for name in ("demo_module", "demo_spans", "translation_demo"):
        spec = load_task_spec(name)
        train_lang = "de" if spec.type == "translation" else spec.source  # translation: a file per pair en-xx
        assert spec.path("train", train_lang).is_file() and spec.path("test", "de").is_file(), name


def test_configs_list_shows_every_name_with_its_description(capsys):
    assert main(["configs", "list"]) == 0
    out = capsys.readouterr().out
    runs, tasks = out.split("tasks (")[0], out.split("tasks (")[1].split("launch configs")[0]
    for name in packaged.names("run"):
        assert re.search(rf"^  {re.escape(name)} +\S", runs, re.M), name
    for name in packaged.names("task"):
        assert re.search(rf"^  {re.escape(name)} +\S", tasks, re.M), name
    assert "ddp-cpu-2proc" in out.split("launch configs")[1]
    # the description is the file's first comment line
    assert re.search(r"^  quickstart +Quickstart: one complete run", runs, re.M)


def test_configs_copy_writes_one_to_edit_and_never_overwrites(tmp_path, capsys):
    assert main(["configs", "copy", "quickstart", str(tmp_path)]) == 0
    copy = tmp_path / "quickstart.yaml"
    assert copy.read_bytes() == (packaged.CONFIGS_DIR / "quickstart.yaml").read_bytes()
    assert f"metaxlm run {copy}" in capsys.readouterr().out
    copy.write_text("# mine\n")
    assert main(["configs", "copy", "quickstart.yaml", str(tmp_path)]) == 2
    assert "already exists: not overwritten" in capsys.readouterr().err
    assert copy.read_text() == "# mine\n"
    assert main(["configs", "copy", "sib200", str(tmp_path / "tasks")]) == 0  # a task too, into a new directory
    assert load_task_spec(tmp_path / "tasks" / "sib200.yaml").name == "sib200"
    assert "metaxlm finetune" in capsys.readouterr().out
    assert main(["configs", "copy", "nope", str(tmp_path)]) == 2
    assert "no packaged config 'nope'" in capsys.readouterr().err


def test_configs_reference_prints_every_section(capsys):
    assert main(["configs", "reference"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Config reference")
    assert "## Run config" in out and "## Task config" in out
    assert "`train.eval_sequences`" in out and "held-out sequences per language" in out


@pytest.mark.parametrize("argv", [["run"], ["run", "--no-progress"], ["run", "train.steps=3"]])
def test_run_without_a_config_says_what_to_pass(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "usage:" not in err  # not argparse's bare usage error
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("metaxlm: error: run needs a config: a YAML file or a packaged name (")
    assert "quickstart" in err and "key.sub=value overrides if any" in err and "metaxlm configs list" in err


def test_the_minimal_config_in_the_docs_is_the_packaged_quickstart():
    """docs/your-own-data.md shows one complete config that runs as written: the packaged quickstart, which the wheel
    test runs from a fresh install; a page that drifted from it would show a config nobody ran."""
    page = (ROOT / "docs" / "your-own-data.md").read_text(encoding="utf-8")
    section = page.split("## A complete minimal config", 1)[1]
    shown = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    assert shown == packaged.find_config("quickstart").read_text(encoding="utf-8")
    assert load_config(packaged.find_config("quickstart")).variants  # and it is a valid run config


def test_a_reader_that_leaves_ends_the_listing_quietly(monkeypatch):
    """`metaxlm configs list | head -1`: once the reader closes the pipe, the command stops with SIGPIPE's status,
    no BrokenPipeError traceback (neither from the command nor from Python's flush at exit)."""
    import os
    import sys

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone before the first line
    pipe = os.fdopen(write_end, "w", buffering=1)
    monkeypatch.setattr(sys, "stdout", pipe)
    try:
        assert main(["configs", "list"]) == 141
        pipe.write("after\n")  # stdout now goes nowhere: nothing raises at exit either
        pipe.flush()
    finally:
        pipe.close()
