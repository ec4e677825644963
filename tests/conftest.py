import os
import random
import shutil
from pathlib import Path

import pytest

# The suite is the CPU's (CI has no GPU): on a machine with GPUs it hides them, so every test runs what CI runs
# (auto devices and precisions on the CPU, tensors compared on the host). GPUs are `make gpu-check`'s
# (docs/scale-out.md); METAXLM_TEST_CUDA=1 keeps them visible. Set before anything initializes CUDA, and inherited
# by the processes tests start.
if os.environ.get("METAXLM_TEST_CUDA") != "1":
    os.environ["CUDA_VISIBLE_DEVICES"] = ""

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"

# The files of the longest tests (several processes, memory limits: 30-100 s each), collected first: pytest-xdist's
# work stealing then spreads the short tests over both workers at the end instead of leaving one worker idle behind
# a long test started last. Whole files move, so their module fixtures are still built once.
LONG_FIRST = ("test_multinode.py", "test_two_processes.py", "test_sharding.py", "test_multiprocess_faults.py",
              "test_veco.py", "test_larger_than_memory.py", "test_engine.py", "test_moco.py", "test_dwa.py",
              "test_wheel.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONG_FIRST)))  # stable: the rest keep their order

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


@pytest.fixture(scope="session")
def run_template(corpora, tokenizer_dir, tmp_path_factory):
    """A run directory with vocab/ and prepared/ (incl. held-out texts), reused by the tests."""
    from metaxlm.config import CorpusSpec, PrepareConfig
    from metaxlm.data.prepare import prepare_corpora

    root = tmp_path_factory.mktemp("pretrain_run")
    shutil.copytree(tokenizer_dir, root / "vocab")
    prepare_corpora({k: CorpusSpec(path=str(p)) for k, p in corpora.items()}, {}, root / "vocab", root / "prepared",
                    PrepareConfig(num_proc=1, heldout_texts=20), progress=False)
    return root


@pytest.fixture(scope="session")
def parallel_template(corpora, tokenizer_dir, tmp_path_factory):
    from metaxlm.config import CorpusSpec, ParallelSpec, PrepareConfig
    from metaxlm.data.prepare import prepare_corpora

    root = tmp_path_factory.mktemp("pretrain_parallel")
    shutil.copytree(tokenizer_dir, root / "vocab")
    pairs = root / "en-de.tsv"
    pairs.write_text("".join(f"the cat sleeps on the red chair {i}\tdie Katze schläft auf dem roten Stuhl {i}\n"
                             for i in range(200)))
    prepare_corpora({k: CorpusSpec(path=str(p)) for k, p in corpora.items()}, {"en-de": ParallelSpec(path=str(pairs))},
                    root / "vocab", root / "prepared", PrepareConfig(num_proc=1, heldout_texts=20), progress=False)
    return root
@pytest.fixture(scope="session", autouse=True)
def precision_cache(tmp_path_factory):
    """`precision: auto` caches its bf16-vs-fp32 measurement: in the session's tmp dir (shared by the CLI
    subprocesses the tests start), not in the user's ~/.cache."""
    os.environ["METAXLM_PRECISION_CACHE"] = str(tmp_path_factory.mktemp("precision") / "precision.json")


@pytest.fixture(scope="session", autouse=True)
def precision_decided_by_the_tests():
    """`precision: auto` is fp32 in every test and every process a test starts (METAXLM_PRECISION_AUTO: the decision
    given), so no number a test compares depends on the CPU kind or its load; tests of the decision itself
    (tests/test_precision.py) unset it and decide with measurements of their own."""
    os.environ["METAXLM_PRECISION_AUTO"] = "fp32"


@pytest.fixture(scope="session", autouse=True)
def one_thread_per_child_process():
    """The CLI runs the tests start (tiny models) get one thread each: the two test workers already hold both
    cores, and a multi-threaded op in a child then waits for descheduled threads. The workers keep their own
    thread count (torch reads the variable once, here, before it is changed)."""
    import torch

    torch.get_num_threads()
    before = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "1"
    yield
    if before is None:
        os.environ.pop("OMP_NUM_THREADS", None)
    else:
        os.environ["OMP_NUM_THREADS"] = before


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models: one thread is faster, and far faster when other processes hold the cores (each multi-threaded
    op then waits for a descheduled worker). Use with `pytestmark = pytest.mark.usefixtures("one_thread")`."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tokenizer(tokenizer_dir):
    """The test tokenizer as fine-tuning loads it."""
    from metaxlm.finetune.models import load_finetune_tokenizer

    return load_finetune_tokenizer(tokenizer_dir, tokenizer_dir)


@pytest.fixture(scope="session")
def tiny_bert_dir(tokenizer_dir, tmp_path_factory) -> Path:
    """A tiny random BertForMaskedLM saved like a metaxlm pretraining checkpoint (MLM head, no task head)."""
    import transformers

    from metaxlm.vocab import load_tokenizer

    tokenizer = load_tokenizer(tokenizer_dir)
    out = tmp_path_factory.mktemp("tiny_bert")
    cfg = transformers.BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=64, max_position_embeddings=128,
                                  pad_token_id=tokenizer.pad_token_id)
    transformers.set_seed(0)
    transformers.BertForMaskedLM(cfg).save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def teacher_dir(tokenizer_dir, tmp_path_factory):
    """A 1-layer MLM with the test vocabulary: the distillation objective's teacher."""
    from metaxlm.config import ModelConfig
    from metaxlm.models import build_mlm
    from metaxlm.vocab import load_tokenizer

    tok = load_tokenizer(tokenizer_dir)
    out = tmp_path_factory.mktemp("teacher") / "model"
    build_mlm(ModelConfig(layers=1, hidden=32, heads=2, ffn=32, max_positions=64), tok, seed=7).save_pretrained(out)
    tok.save_pretrained(out)
    return out
