"""The `select` stage: a continued encoder is never silently worse than its start.

For each selected variant (`select.variants`, by default every variant with `start_from`), the start model and
every kept checkpoint (both exported by the pretrain stage, `pretrain.variant.export_for_evaluation`) are scored on
the DEV parts only of the named evaluation sets (`select.retrieval`, `select.alignment`; the split of
`data.examples.dev_test_split`, the same the evaluate stage reports test scores after). Each dev metric is an error
at the model's best dev layer: retrieval 1 - accuracy@1 (mean of both directions and of the languages), word
alignment AER. A candidate's criterion is the mean over metrics of the error removed against the start's, as a share
of it (`relative`) or in points (`points`). The best checkpoint (ties: the earlier) becomes the variant's final/; the
pretraining's last model moves to last/ (kept, and scored as the last step's candidate on a rerun). The stage
prints, per dev metric, whether final/ is better or worse than the start, and in one line when no checkpoint beats
the start; `pretrain/<variant>/selection.json` records every candidate's dev scores (the report shows them).

Nothing here reads a test part: the layers, the checkpoint and the verdict against the start are all dev decisions.
Each candidate's scores are stored with a fingerprint of its model files and the settings, so a rerun recomputes
only what changed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from metaxlm.config import RunConfig
from metaxlm.errors import ConfigError, MetaXLMError
from metaxlm.io import atomic_dir, atomic_write_json
from metaxlm.metrics import highest_accuracy_layer, lowest_aer_layer
from metaxlm.run import stamps
from metaxlm.run.layout import RunDir, VariantDir

SELECTION_FILE = "selection.json"
LAST_DIR = "last"  # pretraining's own last model, when another checkpoint became final/
START = "start"


def selection_path(vdir: VariantDir) -> Path:
    return vdir.root / SELECTION_FILE


def check_select_config(cfg: RunConfig) -> None:
    """The select section names dev sets the evaluate section has and variants that continue a start model."""
    sel = cfg.select
    if "select" not in cfg.stages:
        return
    if not (sel.retrieval or sel.alignment):
        raise ConfigError("select: name the dev sets it chooses on (select.retrieval and/or select.alignment: names "
                          "of evaluate.retrieval / evaluate.alignment sets)")
    for kind, names, known in (("retrieval", sel.retrieval, cfg.evaluate.retrieval),
                               ("alignment", sel.alignment, cfg.evaluate.alignment)):
        if unknown := [n for n in names if n not in known]:
            raise ConfigError(f"select.{kind}: no evaluate.{kind} set {', '.join(map(repr, unknown))} "
                              f"(sets: {', '.join(known) or 'none'})")
        if no_dev := [n for n in names if known[n].dev_fraction == 0]:
            raise ConfigError(f"select.{kind}: {', '.join(no_dev)} has no dev part (dev_fraction 0): selection "
                              f"chooses on dev parts only")
    for variant in cfg.selected_variants():
        if not cfg.variants[variant].start_from:
            raise ConfigError(f"select.variants: {variant} has no start_from: there is no start model to compare "
                              f"its checkpoints with")
    continued = {v: t.start_from for v, t in cfg.variants.items() if t.start_from in cfg.selected_variants()}
    if continued:  # it would start from final/ before the choice replaced it
        raise ConfigError(f"select: {', '.join(f'{v} starts from {s}' for v, s in continued.items())}, whose final/ "
                          f"the select stage replaces after pretraining; leave {', '.join(set(continued.values()))} "
                          f"out of select.variants, or start from a run that selected already")
    if sel.variants is not None and (unknown := [v for v in sel.variants if v not in cfg.variants]):
        raise ConfigError(f"select.variants: no variant {', '.join(map(repr, unknown))} "
                          f"(variants: {', '.join(cfg.variants)})")


def metric_names(cfg: RunConfig) -> list[str]:
    return [*(f"retrieval {n}" for n in cfg.select.retrieval), *(f"alignment {n}" for n in cfg.select.alignment)]


# --- the dev scores of one model --------------------------------------------------------------------------------

def dev_scores(cfg: RunConfig, model_dir: Path, tokenizer_dir: Path) -> dict[str, dict]:
    """{metric: {"layer": its best dev layer, "error": the error there (fraction), "curve": per-layer dev scores,
    "layers"}} of one model on the selection's dev parts; only dev pairs are encoded."""
    from metaxlm.data.examples import dev_test_split
    from metaxlm.evaluation.recipe import alignment_set, retrieval_languages, retrieval_pairs
    from metaxlm.features.alignment import WordAligner, scores_by_layer
    from metaxlm.features.layers import load_encoder, resolve_layers
    from metaxlm.features.retrieval import retrieval_by_layer

    eval_cfg = cfg.evaluate
    model, tokenizer = load_encoder(model_dir, tokenizer_dir)
    out: dict[str, dict] = {}
    for name in cfg.select.retrieval:
        spec = eval_cfg.retrieval[name]
        curves = []
        for lang in retrieval_languages(spec, cfg.data.languages, cfg.data.pivot):
            src, tgt = retrieval_pairs(spec, lang, cfg.data.pivot)
            dev, _ = dev_test_split(len(src), spec.dev_fraction)
            if not dev:
                raise MetaXLMError(f"select: retrieval {name}, {lang}: no dev pairs ({len(src)} pairs in all)")
            scored = retrieval_by_layer(model, tokenizer, src[:len(dev)], tgt[:len(dev)], layers=eval_cfg.layers,
                                        batch_size=eval_cfg.batch_size, batch_tokens=eval_cfg.batch_tokens,
                                        precision=eval_cfg.precision)
            curves.append(scored["mean"])
        layers = scored["layers"]
        curve = [sum(col) / len(col) for col in zip(*curves, strict=True)]
        layer = highest_accuracy_layer(layers, curve)
        out[f"retrieval {name}"] = {"layers": layers, "curve": curve, "layer": layer,
                                    "error": 1 - curve[layers.index(layer)]}
    for name in cfg.select.alignment:
        spec = eval_cfg.alignment[name]
        aset = alignment_set(spec)
        dev = aset.subset(dev_test_split(len(aset), spec.dev_fraction)[0])
        settings = spec.aligner_settings() if spec.method == "ot" else {}
        aligner = WordAligner(model, tokenizer, method=spec.method, batch_size=eval_cfg.batch_size, **settings)
        layers = resolve_layers(model, eval_cfg.layers)
        predictions = aligner.align_layers(dev.src, dev.tgt, layers)
        curve = scores_by_layer(predictions, dev)["aer"]
        layer = lowest_aer_layer(layers, curve)
        out[f"alignment {name}"] = {"layers": layers, "curve": curve, "layer": layer,
                                    "error": curve[layers.index(layer)]}
    return out


def criterion(start: dict[str, dict], candidate: dict[str, dict], kind: str) -> float:
    """The mean over metrics of the error removed against the start: as a share of the start's error
    (`relative`; a start at zero error counts a candidate also at zero as 0, any error as -1) or in points."""
    gains = []
    for metric, s in start.items():
        before, after = s["error"], candidate[metric]["error"]
        if kind == "points":
            gains.append((before - after) * 100)
        else:
            gains.append((before - after) / before if before > 0 else (0.0 if after == 0 else -1.0))
    return sum(gains) / len(gains)


# --- the stage -------------------------------------------------------------------------------------------------

def _candidates(cfg: RunConfig, variant: str) -> dict[str, tuple[Path, Path]]:
    """{name: (model dir, tokenizer dir)}: "start", then "step N" for every kept checkpoint and the last step."""
    run = RunDir.of(cfg)
    vdir = run.variant(variant)
    start = vdir.start_model
    if not (start / "config.json").exists():
        raise MetaXLMError(f"select {variant}: no start model at {start}: the pretrain stage exports it (run it)")
    found = {START: (start, start)}
    listed = json.loads(vdir.exports.read_text(encoding="utf-8")).get("checkpoints", {}) if vdir.exports.exists() \
        else {}
    for step, dirs in sorted(listed.items(), key=lambda kv: int(kv[0])):
        found[f"step {int(step)}"] = (run.root / dirs["model"], run.root / dirs["tokenizer"])
    summary = json.loads(vdir.summary.read_text(encoding="utf-8"))
    last = vdir.root / LAST_DIR if (vdir.root / LAST_DIR / "config.json").exists() else vdir.final
    found[f"step {summary['steps']}"] = (last, last)
    return found


def _scores(cfg: RunConfig, stored: dict, name: str, model_dir: Path, tokenizer_dir: Path) -> dict:
    key = stamps.fingerprint(model=stamps.model_fingerprint(model_dir, tokenizer_dir),
                             retrieval={n: cfg.evaluate.retrieval[n].model_dump(mode="json")
                                        for n in cfg.select.retrieval},
                             alignment={n: cfg.evaluate.alignment[n].model_dump(mode="json")
                                        for n in cfg.select.alignment},
                             layers=cfg.evaluate.layers, precision=cfg.evaluate.precision,
                             languages=cfg.data.languages, pivot=cfg.data.pivot)
    if stored.get(name, {}).get("fingerprint") == key:
        return stored[name]
    print(f"select: scoring {name} on the dev sets", flush=True)
    return {"fingerprint": key, "model_dir": str(model_dir), "dev": dev_scores(cfg, model_dir, tokenizer_dir)}


def verdict_lines(variant: str, record: dict) -> list[str]:
    """What the stage says of final/ against the start, per dev metric (and one line when no checkpoint beats it)."""
    start, final = record["candidates"][START]["dev"], record["candidates"][record["chosen"]]["dev"]
    lines = []
    if not record["beats_start"]:
        lines.append(f"select {variant}: no checkpoint beats the start on dev (best: {record['chosen']}, criterion "
                     f"{record['scores'][record['chosen']]:+.3f}); final/ is that checkpoint, the start model is "
                     f"{record['start_model']}")
    for metric, s in start.items():
        before, after = s["error"], final[metric]["error"]
        word = "better" if after < before else "worse" if after > before else "the same"
        what = "accuracy@1" if metric.startswith("retrieval") else "AER"
        show = (lambda e: 100 * (1 - e)) if metric.startswith("retrieval") else (lambda e: 100 * e)
        lines.append(f"select {variant}: final/ ({record['chosen']}) is {word} than the start on {metric} dev: "
                     f"{what} {show(after):.1f} vs {show(before):.1f} (layer {final[metric]['layer']} vs "
                     f"{s['layer']})")
    return lines


def select_variant(cfg: RunConfig, variant: str) -> dict:
    vdir = RunDir.of(cfg).variant(variant)
    path = selection_path(vdir)
    previous = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    stored = previous.get("candidates", {})
    candidates = {name: _scores(cfg, stored, name, *dirs) for name, dirs in _candidates(cfg, variant).items()}
    start = candidates[START]["dev"]
    scores = {name: criterion(start, c["dev"], cfg.select.criterion) for name, c in candidates.items()
              if name != START}
    best = max(scores.values())
    chosen = next(name for name, score in scores.items() if score == best)  # the earliest of the best
    record = {"criterion": cfg.select.criterion, "metrics": metric_names(cfg), "candidates": candidates,
              "scores": scores, "chosen": chosen, "beats_start": best > 0,
              "start_model": str(vdir.start_model)}
    _export(vdir, Path(candidates[chosen]["model_dir"]), chosen, last=list(scores)[-1])
    atomic_write_json(path, record)
    for line in verdict_lines(variant, record):
        print(line, flush=True)
    return record


def _export(vdir: VariantDir, chosen_dir: Path, chosen: str, *, last: str) -> None:
    """final/ = the chosen model. The first time another than the last step is chosen, pretraining's final/ moves
    to last/; choosing the last step again moves it back."""
    last_dir = vdir.root / LAST_DIR
    if chosen == last:
        if last_dir.exists():  # final/ holds an earlier choice: the last model back in its place
            shutil.rmtree(vdir.final)
            last_dir.rename(vdir.final)
        return
    if not last_dir.exists():
        vdir.final.rename(last_dir)
    with atomic_dir(vdir.final) as tmp:
        shutil.copytree(chosen_dir, tmp, dirs_exist_ok=True)
        (tmp / "selected.json").write_text(json.dumps({"chosen": chosen, "from": str(chosen_dir)}, indent=1))


def stage_select(cfg: RunConfig, progress: bool = True) -> dict:
    """Choose each selected variant's final/ on dev (module docstring)."""
    check_select_config(cfg)
    return {variant: select_variant(cfg, variant) for variant in cfg.selected_variants()}
