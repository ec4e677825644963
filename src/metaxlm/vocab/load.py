"""Loading tokenizers, and wrapping a sentencepiece model as an HF (XLM-R style) tokenizer directory.

The HF directory keeps `sentencepiece.bpe.model` beside `tokenizer.json`, so the raw pieces stay
available to vocabulary matching and trimming. Ids follow XLM-R: <s>=0 <pad>=1 </s>=2 <unk>=3, then
the sentencepiece pieces (sentencepiece id + 1), then <mask> last.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from metaxlm.errors import DataError

SPM_FILE = "sentencepiece.bpe.model"  # the file name XLM-R checkpoints use


def save_spm_as_hf(spm_model: str | Path, out_dir: str | Path, model_max_length: int = 512):
    """Write an HF tokenizer directory (AutoTokenizer-loadable) for a sentencepiece model; return the tokenizer."""
    from transformers import XLMRobertaTokenizer

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if Path(spm_model).resolve() != (out / SPM_FILE).resolve():
        shutil.copyfile(spm_model, out / SPM_FILE)
    tok = XLMRobertaTokenizer.from_pretrained(str(out), model_max_length=model_max_length)
    tok.save_pretrained(str(out))
    return tok


def save_tokenizer(tokenizer, out_dir: str | Path) -> None:
    """`tokenizer.save_pretrained(out_dir)`, plus the sentencepiece model of the directory it was loaded from:
    a fast tokenizer does not write it, and vocabulary matching and trimming read it from every export."""
    tokenizer.save_pretrained(str(out_dir))
    source = Path(getattr(tokenizer, "name_or_path", "") or "") / SPM_FILE
    if source.is_file() and source.resolve() != (Path(out_dir) / SPM_FILE).resolve():
        shutil.copyfile(source, Path(out_dir) / SPM_FILE)


def load_tokenizer(path: str | Path):
    """Load an HF tokenizer directory, or a sentencepiece `.model` file (wrapped XLM-R style, in memory)."""
    from transformers import AutoTokenizer, XLMRobertaTokenizer

    p = Path(path)
    if not p.exists():
        raise DataError(p, None, "no such tokenizer file or directory")
    if p.is_file():
        if p.suffix != ".model":
            raise DataError(p, None, "expected a sentencepiece .model file or an HF tokenizer directory")
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            shutil.copyfile(p, Path(tmp) / SPM_FILE)
            return XLMRobertaTokenizer.from_pretrained(tmp)
    try:
        return AutoTokenizer.from_pretrained(str(p))
    except (OSError, ValueError) as err:
        raise DataError(p, None, f"not a loadable HF tokenizer directory: {err}") from None
