"""The data of the gettext probe (issue 25: do `make large-corpora`'s catalogue pairs help translation?).

Writes, for en-<lang> into OUT: `dev.en-<lang>.tsv` — the 500 demo training pairs `dev_from_train=500` holds out
(largest sha256 of the id, as every earlier probe); `demo.en-<lang>.tsv` — the other demo training pairs;
`plus.en-<lang>.tsv` — those and the gettext catalogue pairs `make large-corpora` extracts (Cinnamon UI strings,
GCC diagnostics; read here from its cached Debian packages with its own code), less any pair with a side equal to
a dev or test sentence. `gettext_probe.yaml` beside this file is the task both probes run; only `train` differs.

    PYTHONPATH=. python docs/results/translation-probes/gettext_probe.py --lang de --out /tmp/gettext-probe
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from metaxlm.data.benchmarks import load_examples
from metaxlm.finetune.spec import load_task_spec
from metaxlm.finetune.task_data import TaskData
from tools.large_corpora.build import _build_parallel, _Fetcher


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lang", default="de")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--cache", type=Path, default=Path(".cache/registry"))
    args = parser.parse_args()
    lang, out = args.lang, args.out
    out.mkdir(parents=True, exist_ok=True)
    data = TaskData(load_task_spec("translation_demo", ["dev_from_train=500", "max_train_items=13000"]))
    dev, demo = data.dev(lang), data.train(lang)
    test = load_examples("parallel_tsv", Path(f"data/demo/retrieval/en-{lang}.tsv.xz"))
    with tempfile.TemporaryDirectory() as tmp:
        writers = _build_parallel(Path(tmp), _Fetcher(args.cache), ("en", lang), progress=False)  # closes them
        catalogue = [(ex.source, ex.target) for ex in load_examples("parallel_tsv", writers[lang].path)]
    held = {side for ex in (*dev, *test) for side in (ex.source, ex.target)}
    extra = [(en, xx) for en, xx in catalogue if en not in held and xx not in held]

    def write(name: str, pairs) -> None:
        (out / f"{name}.en-{lang}.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in pairs), encoding="utf-8")

    write("dev", [(ex.source, ex.target) for ex in dev])
    write("demo", [(ex.source, ex.target) for ex in demo])
    write("plus", [*((ex.source, ex.target) for ex in demo), *extra])
    print(f"en-{lang}: dev {len(dev)}, demo {len(demo)}, catalogue {len(catalogue)} pairs "
          f"({len(catalogue) - len(extra)} dropped: a side equal to a dev or test sentence), "
          f"plus {len(demo) + len(extra)}")


if __name__ == "__main__":
    main()
