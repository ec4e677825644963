"""What an exported encoder carries besides its weights, so that it is used where users use it:

- `metaxlm_encoder.json`: the layers chosen on dev for sentence vectors and for word alignment, and the pooling
  (`metaxlm align --model DIR` aligns at the recorded alignment layer by default);
- the sentence-transformers files (modules.json, sentence_bert_config.json, 1_Pooling/config.json,
  config_sentence_transformers.json), so that `SentenceTransformer(DIR)` gives the vectors metaxlm's retrieval
  computes at the chosen layer and pooling: the Transformer module loads the model with `num_hidden_layers` set to
  that layer (`config_kwargs`; the deeper layers' weights are left unused, which transformers reports once), and
  the Pooling module pools as metaxlm does (mask-aware mean over every real token, special tokens included, or the
  first token);
- README.md, the model card: Hugging Face's YAML front matter and what a user needs before trusting the model.

These files are read by nothing that computes a result (evaluation fingerprints config, weights and tokenizer
only; a variant starting from this directory fingerprints it without CARD_FILES), so writing them never invalidates
a stored result.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from metaxlm.io import atomic_write_text

ENCODER_INFO = "metaxlm_encoder.json"
POOLING_DIR = "1_Pooling"
# every file written here (patterns as Path.match reads them): what a model's content fingerprint leaves out
CARD_FILES = ("README.md", ENCODER_INFO, "modules.json", "sentence_bert_config.json",
              "config_sentence_transformers.json", f"{POOLING_DIR}/config.json")


def read_encoder_info(model_dir: str | Path) -> dict | None:
    """The model directory's recorded layers and pooling, or None when it has none (any HF encoder)."""
    path = Path(model_dir) / ENCODER_INFO
    if not path.is_file():
        return None
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def write_encoder_info(model_dir: Path, *, retrieval_layer: int | None, alignment_layer: int | None, pooling: str,
                       chosen_on: str, sets: dict[str, Any]) -> None:
    atomic_write_text(Path(model_dir) / ENCODER_INFO, json.dumps(
        {"retrieval_layer": retrieval_layer, "alignment_layer": alignment_layer, "pooling": pooling,
         "chosen_on": chosen_on, "sets": sets}, indent=1) + "\n")


def write_sentence_transformers(model_dir: Path, *, layer: int, num_layers: int, hidden_size: int, pooling: str,
                                max_seq_length: int) -> None:
    """The sentence-transformers module files of an encoder read at `layer` (0 = the embeddings) of `num_layers`."""
    model_dir = Path(model_dir)
    sentence_config: dict[str, Any] = {"max_seq_length": max_seq_length, "do_lower_case": False}
    if layer < num_layers:  # the first `layer` layers: hidden state `layer` is then the last one
        sentence_config["config_kwargs"] = {"num_hidden_layers": layer}
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": POOLING_DIR, "type": "sentence_transformers.models.Pooling"}]
    pooling_config = {"word_embedding_dimension": hidden_size, "pooling_mode_cls_token": pooling == "cls",
                      "pooling_mode_mean_tokens": pooling == "mean", "pooling_mode_max_tokens": False,
                      "pooling_mode_mean_sqrt_len_tokens": False, "pooling_mode_weightedmean_tokens": False,
                      "pooling_mode_lasttoken": False, "include_prompt": True}
    (model_dir / POOLING_DIR).mkdir(exist_ok=True)
    for name, content in (("modules.json", modules), ("sentence_bert_config.json", sentence_config),
                          (f"{POOLING_DIR}/config.json", pooling_config),
                          ("config_sentence_transformers.json", {"prompts": {}, "default_prompt_name": None,
                                                                 "similarity_fn_name": "cosine"})):
        atomic_write_text(model_dir / name, json.dumps(content, indent=1) + "\n")


def write_model_card(model_dir: Path, front_matter: dict[str, Any], body: str) -> None:
    """README.md: Hugging Face's YAML front matter (between `---` lines), then the card's Markdown."""
    header = yaml.safe_dump(front_matter, sort_keys=False, allow_unicode=True).strip()
    atomic_write_text(Path(model_dir) / "README.md", f"---\n{header}\n---\n\n{body.strip()}\n")


def read_model_card(model_dir: Path) -> tuple[dict, str]:
    """(front matter, body) of a README.md written by write_model_card."""
    text = (Path(model_dir) / "README.md").read_text(encoding="utf-8")
    if not text.startswith("---\n"):
        return {}, text
    header, _, body = text[4:].partition("\n---\n")
    return yaml.safe_load(header) or {}, body.strip()
