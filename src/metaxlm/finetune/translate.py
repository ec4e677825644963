"""Machine translation with any HF sequence-to-sequence model directory: loading, batched beam search, sacreBLEU.

Used by the `translation` fine-tuning task (metaxlm.finetune.tasks.translation) and by `metaxlm translate`.
What a model directory must hold: a model `AutoModelForSeq2SeqLM.from_pretrained` loads (e.g. the
`EncoderDecoderModel` that `metaxlm veco export --nlg` writes: BERT encoder, BERT LM-head decoder with
cross-attention) whose config or generation config sets `decoder_start_token_id`, `eos_token_id` and
`pad_token_id`, and a tokenizer beside it (or passed separately).

Generation is HF `generate()` (beam search, length penalty), never a decoder of our own. For speed the sentences
are sorted by length (longest first, so a batch too large for memory fails at once and the ETA is pessimistic),
cut into batches, and the outputs put back in input order; an empty input line gives an empty output line.
Metrics are sacreBLEU's corpus-level BLEU and chrF, reported with their signatures (which say how they were
computed: tokenizer, smoothing, version), so that numbers from different runs can be compared honestly.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from metaxlm.compute.devices import compute_device
from metaxlm.data.padding import pad_right
from metaxlm.errors import DataError, MetaXLMError
from metaxlm.finetune.models import load_finetune_tokenizer, load_seq2seq, special_token

# sacreBLEU picks ja-mecab / ko-mecab for these, which need packages metaxlm does not install: characters instead
BLEU_TOKENIZE = {"zh": "zh", "ja": "char", "ko": "char"}


# -- the model -----------------------------------------------------------------------------------------------------
# the decoding settings a fine-tuned model carries in its generation config (fine-tuning writes the ones it was
# scored with), and what `metaxlm translate` uses when the model has none
DECODING_DEFAULTS = {"num_beams": 4, "length_penalty": 1.0, "no_repeat_ngram_size": 0}


def decoding_settings(model) -> dict[str, Any]:
    """Beam size, length penalty and no-repeat n-gram size from the model's generation config where fine-tuning
    recorded them (`record_decoding`), else DECODING_DEFAULTS: a model saved by `metaxlm finetune --save-models`
    translates as it was scored."""
    config = model.generation_config
    recorded = set(getattr(config, "metaxlm_decoding", None) or ())
    return {key: getattr(config, key) if key in recorded else default for key, default in DECODING_DEFAULTS.items()}


def record_decoding(model, **settings) -> None:
    """Write the decoding settings a model was scored with into its generation config (saved with it)."""
    for key, value in settings.items():
        setattr(model.generation_config, key, value)
    model.generation_config.metaxlm_decoding = sorted(settings)


def length_limits(model, max_source_len: int | None, max_new_tokens: int) -> tuple[int, int]:
    """(source tokens, new tokens) within the model's position embeddings (BERT-style encoders and decoders fail
    past them)."""
    config = model.config
    enc = getattr(getattr(config, "encoder", None), "max_position_embeddings", None) \
        or getattr(config, "max_position_embeddings", None)
    dec = getattr(getattr(config, "decoder", None), "max_position_embeddings", None) \
        or getattr(config, "max_position_embeddings", None)
    source = max_source_len or enc or 512
    if enc:
        source = min(source, enc)
    return source, min(max_new_tokens, dec - 1) if dec else max_new_tokens


# -- generation ----------------------------------------------------------------------------------------------------

def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indices of the non-empty items (length > 0) in batches, longest first."""
    order = sorted((i for i, n in enumerate(lengths) if n > 0), key=lambda i: -lengths[i])
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


@torch.inference_mode()
def generate_translations(model, tokenizer, texts: Sequence[str], *, num_beams: int = 4, length_penalty: float = 1.0,
                          max_new_tokens: int = 128, max_source_len: int | None = None, batch_size: int = 32,
                          no_repeat_ngram_size: int = 0,
                          autocast: Callable[[], Any] = nullcontext, progress: bool = False,
                          desc: str = "translate", stats: dict | None = None) -> list[str]:
    """Translations of `texts`, in their order ("" for a blank text): `generate()` with beam search on batches of
    length-sorted sentences. A text longer than the encoder's maximum (or `max_source_len`) is truncated to it.
    `stats`, when given, receives the generated tokens (EOS included, padding not), sentences, truncated
    sentences, the source limit and seconds."""
    model.eval()
    device = next(model.parameters()).device
    source_len, new_tokens = length_limits(model, max_source_len, max_new_tokens)
    pad = special_token(model, "pad_token_id")
    stripped = [t.strip() for t in texts]
    ids = tokenizer(stripped, add_special_tokens=True)["input_ids"]
    # a line longer than the encoder takes is cut by the tokenizer's own truncation and counted, never an error
    long = [i for i, row in enumerate(ids) if len(row) > source_len]
    if long:
        cut = tokenizer([stripped[i] for i in long], truncation=True, max_length=source_len,
                        add_special_tokens=True)["input_ids"]
        for i, row in zip(long, cut, strict=True):
            ids[i] = row
    truncated = len(long)
    lengths = [len(row) if text.strip() else 0 for row, text in zip(ids, texts, strict=True)]
    out = [""] * len(texts)
    generated = 0
    start = time.perf_counter()
    with tqdm(total=sum(n > 0 for n in lengths), desc=desc, unit=" sent", disable=not progress,
              leave=False) as bar:
        for batch in length_sorted_batches(lengths, batch_size):
            input_ids, mask = pad_right([ids[i] for i in batch], pad)  # as the tokenizer's own `padding=True`
            with autocast():
                result = model.generate(input_ids=input_ids.to(device), attention_mask=mask.to(device),
                                        num_beams=num_beams, length_penalty=length_penalty,
                                        no_repeat_ngram_size=no_repeat_ngram_size,
                                        max_new_tokens=new_tokens, do_sample=False)
            result = result[:, 1:].cpu()  # drop the decoder start token
            generated += int((result != pad).sum())
            for row, i in enumerate(batch):
                out[i] = tokenizer.decode(result[row], skip_special_tokens=True).strip()
            bar.update(len(batch))
    if stats is not None:
        stats.update(tokens=generated, sentences=sum(n > 0 for n in lengths), truncated=truncated,
                     max_source_len=source_len, seconds=time.perf_counter() - start)
    return out


# -- metrics -------------------------------------------------------------------------------------------------------

def bleu_tokenizer(target_lang: str | None, tokenize: str | None = None) -> str:
    """sacreBLEU's tokenizer for BLEU: `tokenize` when given, else by the target language (BLEU_TOKENIZE, 13a)."""
    return tokenize or BLEU_TOKENIZE.get(target_lang or "", "13a")


def corpus_scores(hypotheses: Sequence[str], references: Sequence[str], *, target_lang: str | None = None,
                  tokenize: str | None = None) -> dict[str, Any]:
    """Corpus BLEU and chrF (sacreBLEU, 0..100, one reference per sentence) with their signatures."""
    from sacrebleu.metrics import BLEU, CHRF

    if len(hypotheses) != len(references):
        raise MetaXLMError(f"{len(hypotheses)} translations but {len(references)} references")
    bleu, chrf = BLEU(tokenize=bleu_tokenizer(target_lang, tokenize)), CHRF()
    refs = [list(references)]
    return {"bleu": bleu.corpus_score(list(hypotheses), refs).score,
            "chrf": chrf.corpus_score(list(hypotheses), refs).score,
            "signatures": {"bleu": str(bleu.get_signature()), "chrf": str(chrf.get_signature())}}


# -- files ---------------------------------------------------------------------------------------------------------

STDIO = "-"  # --src - / --out -: standard input / output


def read_stdin_lines(stream=None) -> list[str]:
    """Every line of standard input (blank ones included, a last line without newline counted); a line that is
    not UTF-8 is an error naming <stdin> and the line."""
    import sys

    stream = stream if stream is not None else sys.stdin.buffer
    lines = []
    for line_no, raw in enumerate(stream.read().split(b"\n"), start=1):
        try:
            lines.append(raw.removesuffix(b"\r").decode("utf-8"))
        except UnicodeDecodeError as err:
            raise DataError("<stdin>", line_no, f"not UTF-8 text ({err.reason} at byte {err.start})") from None
    if lines and lines[-1] == "":  # the newline that ends the last line opens no new one
        lines.pop()
    return lines


def read_sentences(path: str | Path) -> list[str]:
    """Every line of a text file (.gz/.xz too; `-`: standard input), blank ones included, so outputs stay
    line-aligned; a line that is not UTF-8 is an error naming the file and line."""
    from metaxlm.data.readers import count_lines, iter_lines

    if str(path) == STDIO:
        return read_stdin_lines()

    try:
        return [line for _, line in iter_lines(path)]
    except DataError as err:
        if err.line is None and err.message == "empty file":  # only blank lines: as many empty outputs
            return [""] * count_lines(path)
        raise


def translate_file(model_dir: str | Path, src: str | Path, out: str | Path, *, tokenizer_dir: str | Path | None = None,
                   num_beams: int | None = None, batch_size: int = 32, max_new_tokens: int = 128,
                   length_penalty: float | None = None, no_repeat_ngram_size: int | None = None,
                   max_source_len: int | None = None, progress: bool = True) -> dict:
    """`metaxlm translate`: translate every line of `src` into `out` (written atomically, one line per input line,
    in input order; `-` for either: standard input / output). Returns the run's stats (sentences, generated
    tokens, truncated sentences, seconds). Decoding settings left None are the model's (`decoding_settings`)."""
    from metaxlm.io import atomic_write_text
    from metaxlm.models.loading import check_vocabulary_fits

    # on the device every loop uses (the GPU when there is one); generate_translations follows the model
    model = load_seq2seq(model_dir).to(compute_device())  # a wrong model dir fails before stdin is read
    texts = read_sentences(src)
    tokenizer = load_finetune_tokenizer(model_dir, tokenizer_dir)
    check_vocabulary_fits(model, tokenizer, model_dir, tokenizer_dir or model_dir)
    stats: dict = {}
    given = {"num_beams": num_beams, "length_penalty": length_penalty, "no_repeat_ngram_size": no_repeat_ngram_size}
    decoding = {**decoding_settings(model), **{k: v for k, v in given.items() if v is not None}}
    hypotheses = generate_translations(model, tokenizer, texts, **decoding, max_new_tokens=max_new_tokens,
                                       max_source_len=max_source_len, batch_size=batch_size, progress=progress,
                                       stats=stats)
    stats["decoding"] = decoding
    # a translation never holds a newline: one line out per line in
    text = "".join(h.replace("\n", " ") + "\n" for h in hypotheses)
    if str(out) == STDIO:
        import sys

        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        atomic_write_text(out, text)
    return {**stats, "lines": len(texts), "hypotheses": hypotheses}
