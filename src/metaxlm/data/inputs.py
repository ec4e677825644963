"""The input files a run's stages will read, checked before the first stage runs (as check_pretraining_config checks
objectives), so that a missing, empty or malformed file fails at once, naming the file, its line, the config key and
the language, not minutes later in the stage that reads it (a bad parallel TSV used to surface in `prepare`, after
the vocabulary was trained; an empty corpus as a traceback in the vocab stage).

What is read how:
- monolingual corpora (`data.mono`): each exists and holds text, read up to its first text (the vocab stage, the
  first to read them, then reads them whole anyway);
- parallel corpora (`data.parallel`) and bilingual dictionaries (`meta.dictionaries`, for variants with use_dict):
  read whole with the readers of metaxlm.data.readers, streamed (.gz/.xz decompressed as read), stopping at the first
  bad line; about 10 MB of text a second.
`hub:` corpora and named models are not looked at (they need the network, which the stage itself uses).

Relative paths are relative to the working directory, as everywhere in a config.
"""

from __future__ import annotations

from pathlib import Path

from metaxlm.config import CorpusSpec, ParallelSpec, RunConfig
from metaxlm.data import readers
from metaxlm.data.corpus import iter_pairs, iter_texts
from metaxlm.errors import DataError, SkipReport

MISSING = ("no such file", "directory holds no files")


def check_inputs(cfg: RunConfig, *, mono: bool = True, parallel: bool = True, dictionaries: bool = True) -> None:
    """Raise a DataError (file and line, then the config key and language) for the first input of `cfg` that the
    stages cannot read: `mono` the monolingual corpora, `parallel` the parallel ones, `dictionaries` the
    dictionaries of the variants that match vocabularies through them."""
    skip_bad = cfg.data.skip_bad
    if mono:
        for lang, spec in cfg.data.mono_corpora().items():
            check_corpus(spec, f"data.mono, language {lang}", skip_bad=skip_bad)
    if parallel:
        for pair, spec in cfg.data.parallel_corpora().items():
            check_parallel(spec, f"data.parallel, pair {pair}", skip_bad=skip_bad)
    if dictionaries and "pretrain" in cfg.stages and any(
            cfg.variants[v].use_dict and cfg.variants[v].init != "none" for v in cfg.variant_order()):
        for lang, path in cfg.dictionary_paths().items():
            if Path(path).is_file():  # a language without a dictionary file is matched without
                _drain(lambda path=path: readers.read_muse_dict(path, skip_bad=skip_bad, report=SkipReport()),
                       f"meta.dictionaries, language {lang}")


def check_corpus(spec: CorpusSpec, where: str, *, skip_bad: bool = False) -> None:
    """A monolingual corpus exists, is readable and holds a text (read up to its first one)."""
    if spec.format == "hub" or (isinstance(spec.path, str) and spec.path.startswith("hub:")):
        return
    try:
        first = next(iter_texts(spec, skip_bad=skip_bad, report=SkipReport()), None)
    except DataError as err:
        raise _located(err, where) from None
    if first is None:
        paths = spec.path if isinstance(spec.path, str) else ", ".join(spec.path)
        raise DataError(paths, None, f"no text in it ({where}): the language has nothing to train on; give it text "
                                     f"or leave it out of data.languages")


def check_parallel(spec: ParallelSpec, where: str, *, skip_bad: bool = False) -> None:
    """A parallel corpus exists and every line of it is a pair (read whole, up to the first bad line)."""
    _drain(lambda: iter_pairs(spec, skip_bad=skip_bad, report=SkipReport()), where)


def _drain(items, where: str) -> None:
    try:
        for _ in items():
            pass
    except DataError as err:
        raise _located(err, where) from None


def _located(err: DataError, where: str) -> DataError:
    """`err` with the config key and language it is about; a missing file also says what it was resolved against."""
    message = err.message
    if message.startswith(MISSING) and not Path(err.path).is_absolute():
        message += f" ({where}; relative paths are relative to the working directory, {Path.cwd()})"
    elif message == "empty file":
        message += f" ({where}): give it text, or leave its language out of data.languages"
    else:
        message += f" ({where})"
    return DataError(err.path, err.line, message)
