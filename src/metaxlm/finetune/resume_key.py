"""The resume key of a fine-tuning run: what it is computed from — the task's settings, the scenario, the model
files it reads and the tokenizer. A finished run stored under this key is reused (metaxlm.finetune.run_store), a
checkpoint of another key is discarded (metaxlm.finetune.checkpoint), so `metaxlm finetune --out` and the evaluate
stage resume the same runs. The fingerprints themselves are made by metaxlm.run.stamps; this module says only which
of a model's files a task reads.
"""

from __future__ import annotations

from pathlib import Path

from metaxlm.models.archs.veco import VECO_SUBDIR
from metaxlm.run.stamps import model_fingerprint, short_fingerprint


def task_model_fingerprint(spec, model_dir: Path, tokenizer_dir: Path, model_key: str | None = None) -> str:
    """model_fingerprint of the model files a task's fine-tuning reads: a translation model assembled with
    `seq2seq.init: random` reads only the shapes (and the tokenizer), `init: veco` also a VECO run's final/veco/;
    every other task the model's files, whose fingerprint `model_key` is when the caller has it already."""
    assembly = getattr(spec, "seq2seq", None)
    if assembly is not None and assembly.init == "random":
        return model_fingerprint(model_dir, tokenizer_dir, weights=False)
    if assembly is not None and assembly.init == "veco" and (Path(model_dir) / VECO_SUBDIR).is_dir():
        return model_fingerprint(model_dir, tokenizer_dir, subfolders=(VECO_SUBDIR,))
    return model_key if model_key is not None else model_fingerprint(model_dir, tokenizer_dir)


def run_fingerprint(spec, scenario: str, model_dir: Path | None = None, tokenizer_dir: Path | None = None, *,
                    model_key: str | None = None) -> str:
    """The resume key of a fine-tuning run of `spec` in `scenario` on the model (`model_key`: the fingerprint of
    the files it reads, task_model_fingerprint, when the caller has it already)."""
    if model_key is None:
        model_key = task_model_fingerprint(spec, model_dir, tokenizer_dir)
    return short_fingerprint(spec=spec.model_dump(mode="json"), scenario=scenario, model=model_key)
