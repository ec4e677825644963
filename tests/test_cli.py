import json
import subprocess
import sys

import pytest
import yaml
from transformers import AutoTokenizer

from metaxlm.cli import build_parser, main

SUBCOMMANDS = [["run"], ["data", "prepare"], ["data", "stats"], ["data", "check"],
               ["vocab", "train"], ["vocab", "trim"]]


@pytest.mark.parametrize("cmd", SUBCOMMANDS, ids=" ".join)
def test_every_subcommand_has_help(cmd, capsys):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args([*cmd, "--help"])
    assert exit_.value.code == 0
    assert "usage: metaxlm" in capsys.readouterr().out


def test_help_and_argument_errors_load_no_ml_library():
    """`metaxlm --help`, every subcommand's help and a usage error answer without importing torch or transformers
    (which take seconds): commands import what they need when they run."""
    code = ("import sys\n"
            "from metaxlm.cli import build_parser\n"
            "parser = build_parser()\n"
            "for argv in (['--help'], ['model', '--help'], ['veco', 'export', '--help'], ['run'], ['nonsense']):\n"
            "    try:\n"
            "        parser.parse_args(argv)\n"
            "    except SystemExit:\n"
            "        pass\n"
            "print(sorted(m for m in ('torch', 'transformers', 'datasets') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "usage: metaxlm" in out.stdout
    assert out.stdout.strip().endswith("[]")


def test_console_script_is_installed():
    out = subprocess.run([sys.executable, "-m", "metaxlm.cli", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("metaxlm ")


@pytest.fixture
def run_config(tmp_path, corpora):
    pairs = tmp_path / "en-de.tsv"
    pairs.write_text("".join(f"the cat {i}\tdie Katze {i}\n" for i in range(50)))
    cfg = {
        "output_dir": str(tmp_path / "run"),
        "data": {"languages": ["en", "de", "ru", "zh"], "mono": {k: str(v) for k, v in corpora.items()},
                 "parallel": {"en-de": str(pairs)}, "alpha": 0.5},
        "vocab": {"size": 100, "sample_sentences": 2000},
        "prepare": {"num_proc": 1},
    }
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_run_end_to_end(run_config, tmp_path, capsys):
    assert main(["run", str(run_config), "vocab.size=90", "--no-progress"]) == 0
    out = capsys.readouterr().out
    run = tmp_path / "run"
    # resolved config (with the override), versions and git commit are recorded
    assert yaml.safe_load((run / "config.yaml").read_text())["vocab"]["size"] == 90
    info = json.loads((run / "run_info.json").read_text())
    assert info["versions"]["torch"].startswith("2.13") and "commit" in info["git"]
    AutoTokenizer.from_pretrained(str(run / "vocab"))
    stats = json.loads((run / "stats.json").read_text())
    assert stats["mono"]["en"]["examples"] == 3000 and stats["parallel"]["en-de"]["examples"] == 50
    assert sum(r["p_alpha"] for r in stats["mono"].values()) == pytest.approx(1)
    for lang in ("en", "de", "ru", "zh"):
        assert f"  {lang} " in out
    # data stats alone prints the same table
    assert main(["data", "stats", str(run_config)]) == 0
    assert "p_alpha" in capsys.readouterr().out


def test_bad_input_is_one_clear_error(tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok\nok\nbad \xfe\nok\n")
    assert main(["data", "check", str(bad), "--format", "text"]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:3:" in err and "Traceback" not in err
    assert main(["data", "check", str(bad), "--format", "text", "--skip-bad"]) == 0
    out = capsys.readouterr().out
    assert "3 text items OK" in out and "skipped 1 bad lines" in out


def test_bad_config_is_one_clear_error(run_config, capsys):
    assert main(["run", str(run_config), "vocab.sizee=3"]) == 2
    assert "command-line override vocab.sizee=3: unknown key (did you mean size?)" in capsys.readouterr().err


def test_prepare_without_vocab_says_what_to_do(run_config, capsys):
    assert main(["data", "prepare", str(run_config)]) == 2
    assert "metaxlm vocab train" in capsys.readouterr().err


def test_vocab_load_mode_imports_an_existing_model(run_config, tokenizer_dir, tmp_path, capsys):
    from metaxlm.vocab.load import SPM_FILE

    for source in (tokenizer_dir / SPM_FILE, tokenizer_dir):  # a sentencepiece file, an HF tokenizer dir
        assert main(["vocab", "train", str(run_config), "vocab.mode=load", f"vocab.path={source}",
                     "--no-progress"]) == 0
        loaded = AutoTokenizer.from_pretrained(str(tmp_path / "run" / "vocab"))
        original = AutoTokenizer.from_pretrained(str(tokenizer_dir))
        assert loaded("the cat sleeps")["input_ids"] == original("the cat sleeps")["input_ids"]
    assert "vocabulary:" in capsys.readouterr().out


@pytest.mark.parametrize("order", ["overrides first", "overrides after --languages"])
def test_finetune_languages_never_take_an_override(order, tmp_path, monkeypatch):
    """`--languages en hyperparameters.epochs=3` once ran 10 epochs with a "language" named by the override."""
    import metaxlm.finetune.runner as runner

    seen = {}

    class Called(Exception):
        pass

    def fake_run_task(spec, model_dir, out_dir, **kwargs):
        seen.update(spec=spec, languages=kwargs["languages"])
        raise Called

    monkeypatch.setattr(runner, "run_task", fake_run_task)
    common = ["--model", str(tmp_path), "--out", str(tmp_path / "out")]
    argv = (["finetune", "demo_module", "hyperparameters.epochs=3", *common, "--languages", "en", "de"]
            if order == "overrides first" else
            ["finetune", "demo_module", *common, "--languages", "en", "de", "hyperparameters.epochs=3",
             "hyperparameters.lr=5e-5"])
    with pytest.raises(Called):
        main(argv)
    assert seen["languages"] == ["en", "de"]
    assert seen["spec"].hyperparameters.epochs == 3
    if order != "overrides first":
        assert seen["spec"].hyperparameters.lr == 5e-5


@pytest.mark.parametrize(("code", "needle"), [("xx", "unknown language code 'xx'"),
                                              ("sw", "task demo_module has no data for 'sw'")])
def test_finetune_language_that_cannot_be_tested_is_one_line_error(code, needle, tmp_path, capsys):
    assert main(["finetune", "demo_module", "--model", str(tmp_path), "--out", str(tmp_path / "out"),
                 "--languages", "en", code, "hyperparameters.epochs=3"]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1
