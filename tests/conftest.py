import os
import random
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"

# A small multilingual vocabulary of real words, so tokenizers see several scripts.
WORDS = {
    "en": "the house is small and the cat sleeps on the red chair near an open window".split(),
    "de": "das Haus ist klein und die Katze schläft auf dem roten Stuhl am offenen Fenster".split(),
    "ru": "дом маленький и кошка спит на красном стуле у открытого окна".split(),
    "zh": list("房子很小猫睡在开着的窗户旁边的红椅子上"),
}


def make_corpus(path: Path, lang: str, n_lines: int, seed: int = 0) -> Path:
    rng = random.Random(seed)
    sep = "" if lang == "zh" else " "
    path.write_text("\n".join(sep.join(rng.choices(WORDS[lang], k=rng.randint(4, 12))) for _ in range(n_lines)) + "\n",
                    encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def corpora(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("corpora")
    sizes = {"en": 3000, "de": 1000, "ru": 300, "zh": 100}
    return {lang: make_corpus(root / f"{lang}.txt", lang, n, seed=i) for i, (lang, n) in enumerate(sizes.items())}


@pytest.fixture(scope="session")
def tokenizer_dir(corpora, tmp_path_factory) -> Path:
    from metaxlm.config import CorpusSpec, VocabConfig
    from metaxlm.vocab import train_vocab

    out = tmp_path_factory.mktemp("vocab") / "tok"
    train_vocab({k: CorpusSpec(path=str(p)) for k, p in corpora.items()}, VocabConfig(size=120, sample_sentences=4000),
                out, alpha=0.7, progress=False)
    return out


@pytest.fixture(scope="session", autouse=True)
def precision_cache(tmp_path_factory):
    """`precision: auto` caches its bf16-vs-fp32 measurement: in the session's tmp dir (shared by the CLI
    subprocesses the tests start), not in the user's ~/.cache."""
    os.environ["METAXLM_PRECISION_CACHE"] = str(tmp_path_factory.mktemp("precision") / "precision.json")
