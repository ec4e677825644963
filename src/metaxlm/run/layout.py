"""Where a run keeps its files: one layout object instead of path helpers scattered over the stages.

    <output_dir>/
      config.yaml, run_info.json       the resolved config and provenance (metaxlm.run.info)
      metaxlm.lock                     held by the command writing the run (metaxlm.run.lock)
      timings.json                     the run clock's measured stage, variant and model times
      vocab/  prepared/  stats.json    shared vocabulary, Arrow data, corpus statistics
      stages/<stage>.json              what vocab/ and prepared/ were made from (reused while unchanged)
      meta/final/                      phase (a): the meta-pretrained English model
      pretrain/<variant>/              one pretraining run: ckpt/, metrics.jsonl, tb/, final/, summary.json,
                                       init.json, coverage.json; for evaluation: start_model/, exports.json
      comparison.md / .json            held-out MLM loss of the variants side by side
      eval/                            evaluation results (results.json, parts/, finetune/)
      report/                          report.md, report.html, figures/
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from metaxlm.io import CHECKPOINTS_DIR

LOCK_FILE = "metaxlm.lock"  # a directory's lock (metaxlm.run.lock): run directories, report folders

# metrics.jsonl: the held-out MLM loss of each language is logged as HELDOUT_LOSS + <lang>, their mean as
# HELDOUT_LOSS + "mean" (written by the engine, read by the report)
HELDOUT_LOSS = "heldout_loss/"


def heldout_losses(record: dict) -> dict[str, float]:
    """The per-language held-out losses of one metrics record ({lang: loss}; the mean left out)."""
    return {k.removeprefix(HELDOUT_LOSS): v for k, v in record.items()
            if k.startswith(HELDOUT_LOSS) and k != f"{HELDOUT_LOSS}mean"}


@dataclass(frozen=True)
class VariantDir:
    """One pretraining run's directory."""

    root: Path

    @property
    def ckpt(self) -> Path:
        return self.root / CHECKPOINTS_DIR

    @property
    def final(self) -> Path:
        return self.root / "final"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.jsonl"

    @property
    def summary(self) -> Path:
        return self.root / "summary.json"

    @property
    def tensorboard(self) -> Path:
        return self.root / "tb"

    @property
    def init_report(self) -> Path:
        return self.root / "init.json"

    @property
    def coverage(self) -> Path:
        return self.root / "coverage.json"

    @property
    def start_model(self) -> Path:
        """A `start_from` variant's start model as evaluation reads it (`start_of:<variant>`)."""
        return self.root / "start_model"

    @property
    def exports(self) -> Path:
        """What pretraining exported for evaluation (metaxlm.pretrain.variant.export_for_evaluation): the directories
        of each evaluated intermediate checkpoint's model and tokenizer. Evaluation reads only what it lists."""
        return self.root / "exports.json"


@dataclass(frozen=True)
class RunDir:
    root: Path

    @classmethod
    def of(cls, cfg) -> RunDir:
        """The layout of a RunConfig's output_dir."""
        return cls(Path(cfg.output_dir))

    @property
    def config(self) -> Path:
        return self.root / "config.yaml"

    @property
    def run_info(self) -> Path:
        return self.root / "run_info.json"

    @property
    def lock(self) -> Path:
        return self.root / LOCK_FILE

    @property
    def timings(self) -> Path:
        return self.root / "timings.json"

    def stamp(self, stage: str) -> Path:
        return self.root / "stages" / f"{stage}.json"

    @property
    def vocab(self) -> Path:
        return self.root / "vocab"

    @property
    def prepared(self) -> Path:
        return self.root / "prepared"

    @property
    def stats(self) -> Path:
        return self.root / "stats.json"

    @property
    def meta(self) -> VariantDir:
        return VariantDir(self.root / "meta")

    def variant(self, name: str) -> VariantDir:
        return VariantDir(self.root / "pretrain" / name)

    @property
    def comparison_md(self) -> Path:
        return self.root / "comparison.md"

    @property
    def comparison_json(self) -> Path:
        return self.root / "comparison.json"

    @property
    def eval(self) -> Path:
        return self.root / "eval"

    @property
    def report(self) -> Path:
        return self.root / "report"
