"""The error messages a new user meets in the first hour (issue 64): each is one line, without a traceback, and names
what to fix — the file (and line), the config key, the language, and what to do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import transformers
from conftest import make_corpus

from metaxlm.cli import main
from metaxlm.config import RunConfig, load_config
from metaxlm.errors import ConfigError, DataError, MetaXLMError


def one_line_error(capsys) -> str:
    """The CLI's error: a single `metaxlm: error:` line, nothing else on stderr, no stage begun on stdout."""
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("metaxlm: error: "), captured.err
    assert "== stage" not in captured.out, "the error must come before the first stage"
    return lines[0].removeprefix("metaxlm: error: ")


@pytest.fixture
def user_dir(tmp_path, monkeypatch):
    """A new user's working directory: corpora beside a config, relative paths."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "corpus").mkdir()
    make_corpus(tmp_path / "corpus" / "en.txt", "en", 60)
    make_corpus(tmp_path / "corpus" / "de.txt", "de", 60)
    (tmp_path / "my.yaml").write_text("output_dir: run\ndata:\n  languages: [en, de]\n  mono: corpus/{lang}.txt\n"
                                      "vocab:\n  size: 100\n")
    return tmp_path


# 1. an empty corpus file
def test_an_empty_corpus_is_named_with_its_language_before_the_first_stage(user_dir, capsys):
    (user_dir / "corpus" / "de.txt").write_text("\n\n")
    assert main(["run", "my.yaml", "--no-progress"]) == 2
    assert one_line_error(capsys) == ("corpus/de.txt: empty file (data.mono, language de): give it text, or leave "
                                      "its language out of data.languages")
    assert not (user_dir / "run" / "vocab").exists()


# 2. every input file's format, before the first stage
def test_a_bad_parallel_tsv_fails_before_the_vocabulary_is_trained(user_dir, capsys):
    (user_dir / "corpus" / "en-de.tsv").write_text("the house\tdas Haus\nthe cat die Katze\nthe chair\tder Stuhl\n")
    assert main(["run", "my.yaml", "data.parallel=corpus/en-{lang}.tsv", "--no-progress"]) == 2
    assert one_line_error(capsys) == ("corpus/en-de.tsv:2: expected 2 non-empty tab-separated columns, got 1 columns "
                                      "(data.parallel, pair en-de)")
    assert not (user_dir / "run" / "vocab").exists()


def test_a_bad_dictionary_and_a_bad_mono_line_are_found_before_the_first_stage(user_dir):
    from metaxlm.data.inputs import check_inputs

    (user_dir / "dict").mkdir()
    (user_dir / "dict" / "en-de.txt").write_text("house\tHaus\ncat Katze extra\n")
    cfg = load_config("my.yaml", ["stages=[vocab, prepare, pretrain]", "meta.dictionaries=dict/en-{lang}.txt",
                                  "variants={dict: {init: both, use_dict: true}}"])
    with pytest.raises(DataError) as err:
        check_inputs(cfg)
    assert str(err.value) == ("dict/en-de.txt:2: expected 'source<TAB>target' or 'source target', got 'cat Katze "
                              "extra' (meta.dictionaries, language de)")
    check_inputs(cfg.model_copy(update={"variants": {"xlm": cfg.variants["dict"].model_copy(
        update={"init": "none", "use_dict": False})}}))  # no variant reads the dictionaries: not checked
    (user_dir / "corpus" / "de.txt").write_bytes(b"\xff\xfe bad\n")
    with pytest.raises(DataError, match=r"^corpus/de.txt:1: invalid UTF-8 .*\(data.mono, language de\)$"):
        check_inputs(cfg, dictionaries=False)


def test_inputs_are_checked_only_for_the_stages_the_run_makes(user_dir, monkeypatch):
    """A rerun that reuses the vocabulary and prepared data reads none of their inputs again."""
    from metaxlm import pipeline

    cfg = load_config("my.yaml", ["stages=[vocab]"])
    seen = []
    monkeypatch.setattr(pipeline, "check_inputs", lambda cfg, **kw: seen.append(kw))
    pipeline.check_stage_inputs(cfg)
    assert seen == [{"mono": True, "parallel": False, "dictionaries": False}]
    cfg = load_config("my.yaml", ["stages=[evaluate]"])
    pipeline.check_stage_inputs(cfg)
    assert seen[-1] == {"mono": False, "parallel": False, "dictionaries": False}


# 3. a missing corpus
def test_a_missing_corpus_says_language_key_and_working_directory(user_dir, capsys):
    assert main(["run", "my.yaml", "data.mono=corpus/{lang}e.txt", "--no-progress"]) == 2
    assert one_line_error(capsys) == (f"corpus/ene.txt: no such file (data.mono, language en; relative paths are "
                                      f"relative to the working directory, {Path.cwd()})")


def test_relative_corpus_paths_are_relative_to_the_working_directory_not_the_config(user_dir, monkeypatch):
    """What docs/your-own-data.md says: a config elsewhere still reads corpus/ of the directory it is run from."""
    from metaxlm.data.inputs import check_inputs

    (user_dir / "configs").mkdir()
    (user_dir / "my.yaml").rename(user_dir / "configs" / "my.yaml")
    check_inputs(load_config("configs/my.yaml"))  # corpus/ beside the working directory, not beside configs/
    monkeypatch.chdir(user_dir / "configs")
    with pytest.raises(DataError, match="corpus/en.txt: no such file .*working directory, .*configs"):
        check_inputs(load_config("my.yaml"))


# 4. an error in a command-line override
def test_an_override_error_names_the_override_not_the_file(user_dir, capsys):
    assert main(["run", "my.yaml", "vocab.size=abc"]) == 2
    assert one_line_error(capsys) == "command-line override vocab.size=abc: Input should be a valid integer"
    with pytest.raises(ConfigError) as err:
        load_config("my.yaml", ["vocab={size: 100, sise: 3}"])
    assert str(err.value) == ("command-line override vocab={size: 100, sise: 3}: vocab.sise: unknown key "
                              "(did you mean size?)")
    (user_dir / "bad.yaml").write_text("output_dir: run\ndata:\n  languages: [en]\n  alpah: 0.3\n")
    with pytest.raises(ConfigError) as err:  # the file's own problem stays the file's, beside the override's
        load_config("bad.yaml", ["vocab.size=abc"])
    assert str(err.value) == ("invalid config bad.yaml:\n  data.alpah: unknown key (did you mean alpha?)\n"
                              "  command-line override vocab.size=abc: Input should be a valid integer")


# 5. "did you mean" for unknown keys
@pytest.mark.parametrize(("text", "overrides", "message"), [
    ("vocab: {size: 100, sise: 3}\n", [], "invalid config my.yaml: vocab.sise: unknown key (did you mean size?)"),
    ("trian: {steps: 3}\n", [], "invalid config my.yaml: trian: unknown key (did you mean train?)"),
    ("", ["trian.steps=3"], "command-line override trian.steps=3: trian: unknown key (did you mean train?)"),
    ("", ["variants.xlm.train.stesp=3"],
     "command-line override variants.xlm.train.stesp=3: unknown key (did you mean steps?)"),
    ("", ["evaluate.retrieval.r={path: x.tsv, max_pair: 3}"],
     "command-line override evaluate.retrieval.r={path: x.tsv, max_pair: 3}: "
     "evaluate.retrieval.r.max_pair: unknown key (did you mean "
     "max_pairs?)"),
    ("", ["train.objectives.mlm.wieght=1"],
     "train.objectives.mlm.wieght: unknown key (did you mean weight?)"),
    ("vocab: {size: 100, zzz: 3}\n", [], "invalid config my.yaml: vocab.zzz: unknown key"),  # nothing close: no guess
])
def test_an_unknown_key_gets_the_closest_valid_key(user_dir, text, overrides, message):
    from metaxlm.pretrain.variant import check_pretraining_config

    base = (user_dir / "my.yaml").read_text()
    (user_dir / "my.yaml").write_text(base.replace("vocab:\n  size: 100\n", "") + text if text.startswith("vocab:")
                                      else base + text)
    with pytest.raises(ConfigError) as err:
        check_pretraining_config(load_config("my.yaml", overrides))
    assert message in str(err.value)


def test_a_task_definition_s_unknown_key_gets_the_closest_valid_key(tmp_path):
    from metaxlm.finetune.spec import load_task_spec

    task = tmp_path / "mytask.yaml"
    task.write_text("type: classification\nformat: demo_module\nmetric: accuracy\nlanguages: [en, de]\n"
                    "test: t.{lang}.jsonl\ntrain: t.en.jsonl\nhyperparamters: {lr: 1.0e-4}\n")
    with pytest.raises(ConfigError) as err:
        load_task_spec(task)
    assert str(err.value) == f"invalid config {task}: hyperparamters: unknown key (did you mean hyperparameters?)"
    task.write_text(task.read_text().replace("hyperparamters", "hyperparameters"))
    with pytest.raises(ConfigError) as err:
        load_task_spec(task, ["hyperparameters.lrr=3"])
    assert str(err.value) == "command-line override hyperparameters.lrr=3: unknown key (did you mean lr?)"


# 6. a vocabulary smaller than asked for
def test_a_vocabulary_short_of_vocab_size_says_why_and_what_to_do(tmp_path, capsys):
    from metaxlm.config import CorpusSpec, VocabConfig
    from metaxlm.vocab import train_vocab

    corpus = make_corpus(tmp_path / "en.txt", "en", 200)
    info = train_vocab({"en": CorpusSpec(path=str(corpus))}, VocabConfig(size=60000, sample_sentences=50),
                       tmp_path / "tok", alpha=0.7, progress=False)
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [f"metaxlm: warning: vocabulary: {info['vocab_size']:,} pieces, fewer than vocab.size=60,000: "
                     f"sentencepiece found no more in the 50 distinct texts sampled (it takes what the text supports, "
                     f"hard_vocab_limit off); raise vocab.sample_sentences (now 50; the corpora hold 200 texts), give "
                     f"more text, or set vocab.size={info['vocab_size']:,} or less"]
    train_vocab({"en": CorpusSpec(path=str(corpus))}, VocabConfig(size=30, sample_sentences=50), tmp_path / "tok2",
                alpha=0.7, progress=False)
    assert "warning" not in capsys.readouterr().err  # the size asked for: nothing to say


# 7. translating with an encoder
def test_translate_with_an_encoder_suggests_what_works_for_that_model(tmp_path, tokenizer_dir, capsys):
    from metaxlm.finetune.spec import load_task_spec

    cfg = transformers.BertConfig(vocab_size=200, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=32)
    transformers.BertForMaskedLM(cfg).save_pretrained(tmp_path / "bert")
    (tmp_path / "src.txt").write_text("the house\n")
    capsys.readouterr()  # save_pretrained's progress bar
    assert main(["translate", "--model", str(tmp_path / "bert"), "--tokenizer", str(tokenizer_dir),
                 "--src", str(tmp_path / "src.txt"), "--no-progress"]) == 2
    message = one_line_error(capsys)
    command = (f"metaxlm finetune translation_demo seq2seq.init=encoder --model {tmp_path / 'bert'} --out OUT "
               f"--save-models")
    assert message == (f"{tmp_path / 'bert'}: not a sequence-to-sequence model (no decoder), "
                       f"so it cannot translate; it "
                       f"is an encoder (bert): fine-tune it on a translation task, which assembles the encoder-decoder "
                       f"from it: `{command}` (then `metaxlm translate --model OUT/models/de-seed0`)")
    assert "veco export" not in message  # which refuses a BERT model
    assert load_task_spec("translation_demo", ["seq2seq.init=encoder"]).seq2seq.init == "encoder"  # as suggested
    # a VECO run's final/ (its NLU export beside veco/): veco export is what it takes
    transformers.BertForMaskedLM(cfg).save_pretrained(tmp_path / "final")
    (tmp_path / "final" / "veco").mkdir()
    (tmp_path / "final" / "veco" / "config.json").write_text(json.dumps({"model_type": "veco"}))
    from metaxlm.finetune.models import load_seq2seq

    with pytest.raises(MetaXLMError, match=rf"a VECO model: .*`metaxlm veco export --model {tmp_path / 'final'} --nlg"):
        load_seq2seq(tmp_path / "final")


# 8. YAML errors name the file, line and column
def test_a_yaml_error_names_the_file_line_and_column(user_dir, capsys):
    (user_dir / "my.yaml").write_text("output_dir: run\ndata:\n  languages: [en, de\n  mono: x\n")
    assert main(["run", "my.yaml"]) == 2
    assert one_line_error(capsys) == ("my.yaml:4:7: not valid YAML: expected ',' or ']', but got ':' (while parsing "
                                      "a flow sequence that starts at line 3, column 14)")
    (user_dir / "task.yaml").write_text("name: t\ntype: classification\n  format: x\n")
    assert main(["finetune", "task.yaml", "--model", "m", "--out", "o"]) == 2
    assert one_line_error(capsys) == "task.yaml:3:9: not valid YAML: mapping values are not allowed here"
    with pytest.raises(ConfigError) as err:
        load_config(None, ["output_dir=run", "seed=[1"])
    assert str(err.value) == ("command-line override seed=[1: cannot parse the value: expected ',' or ']', but got "
                              "'<stream end>' (while parsing a flow sequence, at character 3)")



def test_a_key_given_twice_is_an_error_not_a_lost_value(user_dir, capsys):
    """YAML's last-one-wins would keep the second `train:` and drop the first unsaid; a merge key (`<<: *base`) may
    still be set again, which is what merging is for."""
    (user_dir / "my.yaml").write_text("output_dir: run\ntrain:\n  steps: 3\ntrain:\n  lr: 1.0e-3\n")
    assert main(["run", "my.yaml"]) == 2
    assert one_line_error(capsys) == "my.yaml:4:1: not valid YAML: key 'train' given twice (first at line 2); keep one"
    with pytest.raises(ConfigError, match="key 'steps' given twice"):
        load_config(None, ["output_dir=run", "train={steps: 3, steps: 4}"])
    (user_dir / "merged.yaml").write_text("output_dir: run\nbase: &b {steps: 3, lr: 1.0e-3}\n"
                                          "train: {<<: *b, steps: 5}\n")
    from metaxlm.config.yaml import read_yaml
    assert read_yaml((user_dir / "merged.yaml").read_text())["train"] == {"steps": 5, "lr": 1.0e-3}

def test_a_config_built_in_code_is_checked_the_same_way(user_dir):
    from metaxlm.data.inputs import check_inputs

    (user_dir / "corpus" / "de.txt").write_text("")
    cfg = RunConfig.model_validate({"output_dir": "run", "data": {"languages": ["en", "de"],
                                                                  "mono": "corpus/{lang}.txt"}})
    with pytest.raises(DataError, match=r"^corpus/de.txt: empty file \(data.mono, language de\)"):
        check_inputs(cfg)


def test_the_packaged_dictionaries_are_read_through_their_root_before_the_first_stage():
    """The demo's dictionaries are `{demo}/dict/en-{lang}.txt.xz` (metaxlm.roots): the input check reads them where
    the pretraining reads them (RunConfig.dictionary_paths), not through a template of its own (a KeyError on
    `{demo}`: `make demo` stopped before its first stage)."""
    from metaxlm.data.inputs import check_inputs
    from metaxlm.packaged import find_config

    cfg = load_config(find_config("demo"), ["output_dir=run"])
    paths = cfg.dictionary_paths()
    assert sum(Path(p).is_file() for p in paths.values()) >= 2  # (ru, zh, ... have none: matched without)
    check_inputs(cfg, mono=False, parallel=False)
