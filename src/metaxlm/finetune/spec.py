"""A fine-tuning task's settings: which data, which head, which metric, which hyperparameters.

`configs/tasks/<name>.yaml` (shipped in the package: metaxlm/configs/tasks) holds each task's defaults; a run
config overrides any field (`evaluate.tasks.<name>: {task: <yaml name>, max_train_items: 500}`) and so does the CLI
(`key=value`).
Path templates fill in the named roots (`{data}`: the benchmark data, metaxlm.roots), then `{lang}` (the run's
language code) and `{flores}` (its FLORES-200 code, as
SIB-200 names its folders); a mapping gives one path per language instead, for benchmarks whose files
are named irregularly (UD treebanks). Relative paths are relative to the working directory, as in run configs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from metaxlm.config import YAML_ERRORS, Strict, apply_override, format_errors, read_yaml, yaml_error
from metaxlm.data.benchmarks import FORMATS
from metaxlm.errors import ConfigError
from metaxlm.finetune.hyperparameters import Hyperparameters
from metaxlm.finetune.tasks import TASKS
from metaxlm.languages import check_language, flores_code
from metaxlm.packaged import KIND_DIRS, find_config
from metaxlm.roots import expand_roots

TASK_CONFIG_DIR = KIND_DIRS["task"]  # the packaged task definitions (metaxlm/configs/tasks)

PathTemplate = str | dict[str, str] | None


class Seq2SeqAssembly(Strict):
    """How a translation task builds its encoder-decoder when the model directory holds an encoder (a VECO run's
    output, any BERT-style MLM): metaxlm.models.veco_export.assemble_seq2seq, new weights drawn under the
    fine-tuning seed. veco: the VECO layers' own cross-attention; encoder: the same encoder weights in both
    halves, cross-attention new; random: the same shapes, every weight new."""
    init: Literal["veco", "encoder", "random"]
    decoder_layers: int | list[int] = 6  # the last n layers, or layer indices (the paper: 6)
    # full: the model's whole vocabulary; train: the tokenizer and every vocabulary row (both embeddings, the output
    # layer) trimmed to the pieces the training pairs use, both sides (a 250k or 46k-row softmax dominates a small
    # decoder's cost; the training text tokenizes exactly as before, other text may take smaller pieces)
    vocabulary: Literal["full", "train"] = "full"
    # one word-embedding matrix for encoder input, decoder input and decoder output (the paper's shared
    # embeddings); false: the halves start equal and train apart (the decoder's output stays tied to its input)
    share_embeddings: bool = False
    # cross-attention at hyperparameters.head_lr_scale whatever its start: with init veco it comes pretrained (by
    # CS-MLM) and would otherwise train at the body's rate; init encoder / random already count it as new
    fast_cross_attention: bool = False


class TaskSpec(Strict):
    name: str
    # a registered task type (metaxlm.finetune.tasks: classification, tagging, spans, qa, translation; a plugin adds
    # its own), which declares its metrics and the examples its format must yield
    type: str
    format: str  # a registered benchmark format (metaxlm.data.benchmarks: demo_module, xnli, udpos, squad, ...)
    # one of the type's metrics: classification: accuracy; tagging: accuracy | seqeval_f1; spans: span_f1;
    # qa: f1 | exact_match; translation: bleu | chrf (sacreBLEU, both are reported)
    metric: str
    languages: list[str]
    source: str = "en"
    test: str | dict[str, str]
    train: PathTemplate = None
    dev: PathTemplate = None
    translate_train: PathTemplate = None  # machine-translated train data per language (translate_train scenario)
    # Where the training items come from. `test_half`: the test items of half of the documents (QA: the
    # article title; other tasks: the id part before '#'), chosen by sha256, in the source language; every
    # language is then tested on the other half only (XQuAD has no English train split of its own).
    train_from: Literal["train", "test_half"] = "train"
    # The same for the transfer_matrix scenario (default: as train_from). With `train`, a source language
    # without a train file falls back to its translate_train file, then its dev file, else its row is null.
    matrix_train_from: Literal["train", "test_half"] | None = None
    # translate_train, pair tasks: the training set of a target language (scenarios.code_switched_items). `paper`,
    # Pan et al. (2021, Section 2.3): the source-language (English) items, plus for each translated item with an
    # English match its two code-switched pairs (x_xx, y_en), (x_en, y_xx), in one batch; the translated original
    # (x_xx, y_xx) is not trained on (their footnote 2 drops it, and only it). `pairs_only`: the pairs alone, no
    # English items (departs from the paper; metaxlm's default from issue 26 to issue 63). `originals`: `paper` plus
    # the translated originals (departs from footnote 2). `none`: plain translate-train, English and translated
    # items. true / false (the boolean this field was): paper / none.
    code_switch: Literal["paper", "pairs_only", "originals", "none"] = "paper"
    qa_normalization: Literal["squad", "mlqa"] = "squad"  # mlqa: per-language answer normalization
    # translation: `forward` translates the source language (TSV column 1, the `{side}` = source file) into each
    # language, `reverse` each language into the source language
    direction: Literal["forward", "reverse"] = "forward"
    # translation: sacreBLEU's tokenizer for BLEU; None: by target language (zh: zh; ja, ko: char, since the
    # mecab tokenizers are not installed; else 13a). The signature in the results names the one used.
    bleu_tokenize: str | None = None
    # translation: assemble the encoder-decoder from the model directory (else it must be one already)
    seq2seq: Seq2SeqAssembly | None = None
    hyperparameters: Hyperparameters = Field(default_factory=Hyperparameters)
    max_train_items: int | None = Field(None, ge=1)  # per training language, first items by sha256 of the id
    max_test_items: int | None = Field(None, ge=1)   # per test language, chosen the same way
    # A dev set cut from the training file: the n items of each language with the LARGEST sha256 of their id, never
    # trained on (max_train_items then caps the rest), for choosing settings where the dev file is missing.
    dev_from_train: int | None = Field(None, ge=1)
    # what is scored: `test` (the test file), or `dev` (the dev file, else the items dev_from_train holds out) when
    # settings are being chosen — the numbers a README reports are test numbers of settings chosen on dev
    evaluate_on: Literal["test", "dev"] = "test"
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2])
    note: str = ""  # free text for the results entry (e.g. how the data was split)

    @model_validator(mode="before")
    @classmethod
    def _retired_code_switch_flags(cls, data: Any) -> Any:
        """The two booleans that chose the recipe before its names are refused, not mapped: left out,
        code_switch_english meant the pairs without the English items, which the default (`paper`) no longer is, so
        an old config's set is not knowable from the flags it sets (code_switch_originals alone: no recipe now)."""
        if isinstance(data, dict) and (old := [k for k in ("code_switch_english", "code_switch_originals")
                                               if k in data]):
            raise ValueError(f"{' and '.join(old)}: replaced by code_switch: paper (the English items and the "
                             f"code-switched pairs, Pan et al.), pairs_only, originals or none (docs/ppa.md)")
        return data

    @field_validator("code_switch", mode="before")
    @classmethod
    def _code_switch_boolean(cls, value: Any) -> Any:
        """true / false, as the field was a boolean: the paper's recipe / none."""
        return {True: "paper", False: "none"}.get(value, value) if isinstance(value, bool) else value

    @field_validator("languages")
    @classmethod
    def _known(cls, langs: list[str]) -> list[str]:
        for lang in langs:
            check_language(lang, "languages")
        if len(set(langs)) != len(langs):
            raise ValueError("duplicate language codes")
        return langs

    @model_validator(mode="after")
    def _consistent(self) -> TaskSpec:
        check_language(self.source, "source")
        if self.source not in self.languages:
            raise ValueError(f"source {self.source!r} is not one of languages")
        if self.train_from == "train" and self.train is None:
            raise ValueError("train_from=train needs a `train` path (or set train_from: test_half)")
        if self.type not in TASKS:
            raise ValueError(f"type: unknown task type {self.type!r} (registered: {', '.join(TASKS.names())})")
        task_type = TASKS.get(self.type)
        if self.metric not in task_type.metrics:
            raise ValueError(f"metric {self.metric!r} is not one of {sorted(task_type.metrics)} for type {self.type}")
        if self.format not in FORMATS:
            raise ValueError(f"format: unknown benchmark format {self.format!r} (registered: "
                             f"{', '.join(FORMATS.names())})")
        def fits(fmt: str) -> bool:  # the format yields the examples the type reads
            yields = FORMATS.get(fmt).examples
            return yields is not None and task_type.examples is not None and issubclass(yields, task_type.examples)

        if not fits(self.format):
            fitting = [f for f in FORMATS.names() if fits(f)]
            raise ValueError(f"format {self.format!r} does not fit type {self.type}: {self.type} tasks read "
                             f"{' or '.join(fitting) or 'no registered format'}")
        if self.dev_from_train is not None and self.train_from != "train":
            raise ValueError("dev_from_train cuts the dev set from the train file: it needs train_from: train")
        task_type.check_spec(self)
        return self

    def path(self, which: Literal["train", "dev", "test", "translate_train"], lang: str) -> Path | None:
        """The file for `lang`, or None when the template does not cover that language."""
        template = getattr(self, which)
        if template is None:
            return None
        # the named roots ({data}: the benchmark data) first, then the language's codes
        if isinstance(template, dict):
            return Path(expand_roots(template[lang])) if lang in template else None
        # `{side}` (file pairs of translation tasks) is left for the loader, which fills in each side's language
        template = expand_roots(template)
        flores = flores_code(lang) if "{flores}" in template else None  # only a template that names it needs it
        return Path(template.format(lang=lang, flores=flores, side="{side}"))


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _deep_merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) \
            else value
    return out


def load_task_spec(path_or_name: str | Path, overrides: dict[str, Any] | list[str] | None = None) -> TaskSpec:
    """Read a task YAML (a file, or the name of a packaged task: metaxlm.packaged) and apply overrides: a mapping
    (from a run config's `evaluate.tasks` entry; its `task` key names the YAML and is dropped) or `key.sub=value`
    strings."""
    path = find_config(path_or_name, kind="task")
    try:
        tree = read_yaml(path.read_text(encoding="utf-8")) or {}
    except OSError as err:
        raise ConfigError(f"cannot read task config {path}: {err.strerror}") from None
    except YAML_ERRORS as err:
        raise yaml_error(err, path) from None
    if not isinstance(tree, dict):
        raise ConfigError(f"{path}: top level must be a mapping of keys")
    tree.setdefault("name", path.stem)
    if isinstance(overrides, dict):
        tree = _deep_merge(tree, {k: v for k, v in overrides.items() if k != "task"})
    else:
        for override in overrides or ():
            apply_override(tree, override)
    try:
        return TaskSpec.model_validate(tree)
    except ValidationError as err:
        raise ConfigError(format_errors(err, str(path), TaskSpec, overrides if isinstance(overrides, list) else ()))\
            from None
