"""Hostile model and data directories (issue 13, trust under faults): a pickle checkpoint instead of safetensors, a
broken config.json, a tokenizer larger than the embedding matrix, an archive entry that escapes its folder, a
tampered optimizer state. Each is refused with the project's own error naming the file, and no pickle from a user
directory is ever unpickled (the payloads below would leave a marker file if it were)."""

import io
import json
import shutil
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import torch
import transformers

from metaxlm.cli import main
from metaxlm.compute.sharding import optimizer_state
from metaxlm.data.examples import TaggingExample
from metaxlm.errors import DataError, MetaXLMError
from metaxlm.features.layers import load_encoder
from metaxlm.finetune.models import load_model, load_seq2seq
from metaxlm.finetune.spec import Hyperparameters
from metaxlm.finetune.tasks import get_task
from metaxlm.models import loading
from metaxlm.models.checkpoint import (
    CorruptCheckpoint,
    load_checkpoint,
    load_optimizer_states,
    load_training_state,
    save_checkpoint,
)
from metaxlm.models.english import import_english_encoder
from metaxlm.models.loading import load_model_config, load_pretrained

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # tools/ (the dataset builders) is not an installed package
    sys.path.insert(0, str(REPO))

from tools.fetch import FetchError, fetch_pypi  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


class RunsCode:
    """Unpickling this writes the marker file: the proof that a loader ran a pickle's code."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def tiny_bert(tokenizer, out: Path, vocab_size: int | None = None) -> Path:
    """A tiny BertForMaskedLM + its tokenizer saved like a metaxlm checkpoint (safetensors)."""
    cfg = transformers.BertConfig(vocab_size=vocab_size or len(tokenizer), hidden_size=16, num_hidden_layers=1,
                                  num_attention_heads=2, intermediate_size=32, max_position_embeddings=64,
                                  pad_token_id=tokenizer.pad_token_id)
    transformers.BertForMaskedLM(cfg).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def model_dir(tokenizer, tmp_path_factory) -> Path:
    return tiny_bert(tokenizer, tmp_path_factory.mktemp("tiny_bert"))


def copy_of(model_dir: Path, tmp_path: Path) -> Path:
    out = tmp_path / "model"
    shutil.copytree(model_dir, out)
    return out


def tagging_task(tokenizer):
    task = get_task("tagging")(tokenizer, Hyperparameters(lr=1e-3, batch_size=4, max_steps=1, max_seq_len=32))
    task.fit_labels([TaggingExample("s1", ("the", "house"), ("DET", "NOUN"))])
    return task


# -- 1. pickle checkpoints ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("pickle_name", ["pytorch_model.bin", "model.pt", "model.ckpt"])
def test_pickle_checkpoint_is_refused_and_never_unpickled(model_dir, tokenizer, tmp_path, pickle_name):
    hostile = copy_of(model_dir, tmp_path)
    (hostile / "model.safetensors").unlink()
    marker = tmp_path / "marker"
    torch.save({"bert.embeddings.word_embeddings.weight": RunsCode(marker)}, hostile / pickle_name)

    loaders = {
        "evaluation": lambda: load_encoder(hostile),
        "fine-tuning": lambda: load_model(tagging_task(tokenizer), hostile),
        "translation": lambda: load_seq2seq(hostile),
        "import": lambda: import_english_encoder(hostile, tmp_path / "imported"),
    }
    for what, load in loaders.items():
        with pytest.raises(DataError, match=rf"pickle checkpoint \({pickle_name}\).*only from safetensors") as err:
            load()
        assert err.value.path == str(hostile / pickle_name), what
    assert not marker.exists()


def test_transformers_refuses_the_pickle_too(model_dir, tmp_path, monkeypatch):
    """use_safetensors=True: even with metaxlm's own check bypassed, transformers does not fall back to a pickle."""
    hostile = copy_of(model_dir, tmp_path)
    (hostile / "model.safetensors").unlink()
    marker = tmp_path / "marker"
    torch.save({"x": RunsCode(marker)}, hostile / "pytorch_model.bin")
    monkeypatch.setattr(loading, "load_model_config", lambda model_dir: None)
    with pytest.raises(OSError, match="model.safetensors"):
        load_pretrained(transformers.AutoModel, hostile)
    assert not marker.exists()


def test_config_naming_a_pickle_is_refused(model_dir, tmp_path):
    hostile = copy_of(model_dir, tmp_path)
    marker = tmp_path / "marker"
    torch.save({"x": RunsCode(marker)}, hostile / "adapter_model.bin")
    config = json.loads((hostile / "config.json").read_text())
    # transformers loads the file a config's transformers_weights names, even with use_safetensors=True
    (hostile / "config.json").write_text(json.dumps({**config, "transformers_weights": "adapter_model.bin"}))
    with pytest.raises(DataError, match="transformers_weights names 'adapter_model.bin', not a safetensors file"):
        load_encoder(hostile)
    assert not marker.exists()


def test_safetensors_beside_a_pickle_loads_the_safetensors(model_dir, tmp_path):
    mixed = copy_of(model_dir, tmp_path)
    marker = tmp_path / "marker"
    torch.save({"x": RunsCode(marker)}, mixed / "pytorch_model.bin")
    model, _ = load_encoder(mixed)
    assert model.config.hidden_size == 16
    assert not marker.exists()


def test_cli_prints_one_clear_error(model_dir, tmp_path, capsys):
    hostile = copy_of(model_dir, tmp_path)
    (hostile / "model.safetensors").unlink()
    torch.save({}, hostile / "pytorch_model.bin")
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("the house ||| das Haus\n")
    assert main(["align", "--model", str(hostile), "--src", str(pairs), "--out", str(tmp_path / "out.txt"),
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"metaxlm: error: {hostile / 'pytorch_model.bin'}: a pickle checkpoint")
    assert "Traceback" not in err


# -- 2. config.json -------------------------------------------------------------------------------------------------

def edited(**changes):
    def edit(config_file: Path) -> None:
        config = json.loads(config_file.read_text())
        config.update(changes)
        config_file.write_text(json.dumps(config, indent=2))
    return edit


def without(key):
    def edit(config_file: Path) -> None:
        config = json.loads(config_file.read_text())
        del config[key]
        config_file.write_text(json.dumps(config))
    return edit


CONFIG_PROBLEMS = {
    "missing": (lambda f: f.unlink(), r"config.json: missing: not an HF model directory"),
    "not JSON": (lambda f: f.write_text('{\n  "model_type": "bert",\n  hidden_size: 16\n}'),
                 r"config.json:3: not valid JSON"),
    "not an object": (lambda f: f.write_text("[1, 2]"), r"config.json: expected a JSON object .* got a list"),
    "not UTF-8": (lambda f: f.write_bytes(b'{"model_type": "\xff"}'), r"config.json: unreadable"),
    "unknown model_type": (edited(model_type="hostile-net"),
                           r"config.json: model_type 'hostile-net' is not an architecture transformers"),
    "no model_type": (without("model_type"), r"config.json: no model_type"),
    "negative hidden_size": (edited(hidden_size=-16), r"config.json: hidden_size is -16: it must be a whole number"),
    "zero heads": (edited(num_attention_heads=0), r"config.json: num_attention_heads is 0"),
    "negative layers": (edited(num_hidden_layers=-1), r"config.json: num_hidden_layers is -1"),
    "text size": (edited(vocab_size="many"), r"config.json: vocab_size is 'many'"),
    "negative other size": (edited(type_vocab_size=-2), r"config.json: type_vocab_size is -2: a size or count cannot"),
    "bad sub-config": (edited(model_type="encoder-decoder", encoder={"model_type": "bert", "hidden_size": -8},
                              decoder={"model_type": "bert"}), r"config.json: encoder.hidden_size is -8"),
    "wrong type": (edited(layer_norm_eps="tiny"), r"config.json: transformers cannot read it"),
}


@pytest.mark.parametrize("problem", CONFIG_PROBLEMS)
def test_broken_config_names_the_file(model_dir, tmp_path, problem):
    hostile = copy_of(model_dir, tmp_path)
    edit, message = CONFIG_PROBLEMS[problem]
    edit(hostile / "config.json")
    with pytest.raises(DataError, match=message) as err:
        load_model_config(hostile)
    assert err.value.path == str(hostile / "config.json")
    with pytest.raises(DataError, match=message):  # the same through a user-facing loader
        load_encoder(hostile)


def test_extra_config_keys_and_missing_dirs(model_dir, tmp_path):
    extra = copy_of(model_dir, tmp_path)
    edited(written_by="another toolkit")(extra / "config.json")  # HF configs carry such keys: kept, not refused
    assert load_model_config(extra).written_by == "another toolkit"
    # never taken for a Hub model name: nothing is fetched at run time
    with pytest.raises(DataError, match="no such model directory"):
        load_model_config(tmp_path / "no" / "such")
    (extra / "model.safetensors").unlink()
    with pytest.raises(DataError, match="no model.safetensors"):
        load_model_config(extra)


# -- 3. tokenizer larger than the embedding matrix ------------------------------------------------------------------

@pytest.fixture(scope="module")
def small_model_dir(tokenizer, tmp_path_factory) -> Path:
    """A model with 5 embedding rows fewer than the tokenizer (saved beside it) has pieces."""
    return tiny_bert(tokenizer, tmp_path_factory.mktemp("small_bert"), vocab_size=len(tokenizer) - 5)


def test_tokenizer_larger_than_the_model_is_refused(small_model_dir, tokenizer, tokenizer_dir, tmp_path):
    pieces, rows = f"{len(tokenizer):,}", f"{len(tokenizer) - 5:,}"
    message = rf"the tokenizer .*has {pieces} pieces but the model's embedding matrix has {rows} rows"
    with pytest.raises(DataError, match=message) as err:  # evaluation (retrieval, alignment)
        load_encoder(small_model_dir, tokenizer_dir)
    assert err.value.path == str(small_model_dir)
    assert str(tokenizer_dir) in str(err.value)
    with pytest.raises(DataError, match=message):  # fine-tuning
        load_model(tagging_task(tokenizer), small_model_dir)
    with pytest.raises(DataError, match=message):  # the start of a continued pretraining (meta.source: import)
        import_english_encoder(small_model_dir, tmp_path / "imported")
    assert not (tmp_path / "imported").exists()


def test_model_with_spare_embedding_rows_loads(tokenizer, tokenizer_dir, tmp_path):
    padded = tiny_bert(tokenizer, tmp_path / "padded", vocab_size=len(tokenizer) + 8)
    model, _ = load_encoder(padded, tokenizer_dir)
    assert model.get_input_embeddings().num_embeddings == len(tokenizer) + 8


# -- 4. archives whose entries escape their folder (tools/fetch.py unpacks PyPI wheels and sdists) -----------------

def zip_with(path: Path, name: str, content: bytes = b"x", symlink: bool = False) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("demo_pkg/ok.txt", "fine")
        info = zipfile.ZipInfo(name)
        if symlink:
            info.external_attr = 0o120777 << 16  # a symlink: the content is its target
        z.writestr(info, content)
    return path


def tar_with(path: Path, *members: tarfile.TarInfo) -> Path:
    with tarfile.open(path, "w:gz") as t:
        ok = tarfile.TarInfo("demo_pkg-1.0/ok.txt")
        ok.size = 4
        t.addfile(ok, io.BytesIO(b"fine"))
        for member in members:
            data = b"x" * member.size
            t.addfile(member, io.BytesIO(data) if member.isfile() else None)
    return path


def entry(name: str, kind=tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.size = kind, link, 1 if kind == tarfile.REGTYPE else 0
    return info


HOSTILE_ARCHIVES = {
    "zip ../": (lambda p: zip_with(p / "demo_pkg-1.0-py3-none-any.whl", "../evil.txt"), "would be written outside"),
    "zip absolute": (lambda p: zip_with(p / "demo_pkg-1.0-py3-none-any.whl", "/tmp/evil.txt"),
                     "would be written outside"),
    "zip symlink": (lambda p: zip_with(p / "demo_pkg-1.0-py3-none-any.whl", "demo_pkg/link", b"../../../etc",
                                       symlink=True), "points outside"),
    "tar ../": (lambda p: tar_with(p / "demo_pkg-1.0.tar.gz", entry("demo_pkg-1.0/../../evil.txt")),
                "would be written outside"),
    "tar absolute": (lambda p: tar_with(p / "demo_pkg-1.0.tar.gz", entry("/tmp/evil.txt")),
                     "would be written outside"),
    "tar symlink": (lambda p: tar_with(p / "demo_pkg-1.0.tar.gz", entry("demo_pkg-1.0/link", tarfile.SYMTYPE,
                                                                        "../../outside")), "points outside"),
    "tar absolute symlink": (lambda p: tar_with(p / "demo_pkg-1.0.tar.gz", entry("demo_pkg-1.0/etc", tarfile.SYMTYPE,
                                                                                 "/etc")), "points outside"),
    "tar hard link": (lambda p: tar_with(p / "demo_pkg-1.0.tar.gz", entry("demo_pkg-1.0/passwd", tarfile.LNKTYPE,
                                                                          "../etc/passwd")), "points outside"),
    # each link points inside by its name, but the second is reached through the first: the data filter's refusal
    "tar link through a link": (lambda p: tar_with(p / "demo_pkg-1.0.tar.gz",
                                                   entry("demo_pkg-1.0/up", tarfile.SYMTYPE, ".."),
                                                   entry("demo_pkg-1.0/up/out", tarfile.SYMTYPE, "..")),
                                "cannot unpack it safely"),
}


@pytest.mark.parametrize("case", HOSTILE_ARCHIVES)
def test_archive_entry_escaping_its_folder_is_refused(tmp_path, case):
    cache = tmp_path / "cache"
    (cache / "pypi").mkdir(parents=True)
    make, message = HOSTILE_ARCHIVES[case]
    archive = make(cache / "pypi")  # cached: no download
    with pytest.raises(FetchError, match=message) as err:
        fetch_pypi("demo-pkg", "1.0", cache)
    assert str(err.value).startswith(f"{archive}: ")
    # nothing written beside the archive or the unpack folder, and no half tree left
    assert [p for p in tmp_path.rglob("*") if p.is_symlink() or not p.is_dir()] == [archive]


def test_safe_archives_still_unpack(tmp_path):
    cache = tmp_path / "cache"
    (cache / "pypi").mkdir(parents=True)
    tar_with(cache / "pypi" / "demo_pkg-1.0.tar.gz", entry("demo_pkg-1.0/docs/readme", tarfile.SYMTYPE, "../ok.txt"))
    package = fetch_pypi("demo-pkg", "1.0", cache)
    assert (package.root / "demo_pkg-1.0/docs/readme").read_text() == "fine"


# -- the run directory's own checkpoints ----------------------------------------------------------------------------

def test_tampered_optimizer_state_is_refused_unrun(tmp_path):
    import hashlib

    model = transformers.BertForMaskedLM(transformers.BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1,
                                                                 num_attention_heads=2, intermediate_size=16))
    optimizer = torch.optim.AdamW(model.parameters())
    scheduler = torch.optim.lr_scheduler.LinearLR(optimizer)
    ckpt = save_checkpoint(tmp_path / "ckpt", 1, model=model, optimizer_state=optimizer_state(model, optimizer),
                           scheduler=scheduler, state={}, keep=1)
    assert load_checkpoint(ckpt, model=model)["step"] == 1
    load_optimizer_states(ckpt, module=model, optimizer=optimizer, scheduler=scheduler)

    marker = tmp_path / "marker"
    torch.save({"state": RunsCode(marker)}, ckpt / "optimizer.pt")
    sums = json.loads((ckpt / "checksums.json").read_text())  # rewritten too: the checksums only catch accidents
    sums["optimizer.pt"] = hashlib.sha256((ckpt / "optimizer.pt").read_bytes()).hexdigest()
    (ckpt / "checksums.json").write_text(json.dumps(sums))
    with pytest.raises(CorruptCheckpoint, match=r"optimizer.pt: not a plain training state.*weights_only=False"):
        load_optimizer_states(ckpt, module=model, optimizer=optimizer, scheduler=scheduler)
    assert not marker.exists()
    (ckpt / "scheduler.pt").write_bytes(b"not a torch file")
    with pytest.raises(CorruptCheckpoint, match="scheduler.pt: not a plain training state"):
        load_training_state(ckpt / "scheduler.pt")
    assert isinstance(CorruptCheckpoint("x"), MetaXLMError)
