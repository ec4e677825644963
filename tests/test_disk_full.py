"""A full disk (issue 13): every write a run depends on fails with one DiskFull message naming what was being
written, the free space, what is intact and what to do; partial files are removed and never read; after freeing
space the rerun (--resume) finishes and equals the uninterrupted run.

Fault injection at each write point with the exceptions a real full disk raised (OSError ENOSPC; safetensors'
SafetensorError "... (os error 28)"; torch.save's RuntimeError "unexpected pos", which carries no errno, so the
free space, ~0 at that moment, is the evidence), then for real on a small tmpfs (root only: skipped otherwise)
through the scenarios of bench/disk_full.py."""

import errno
import importlib.util
import json
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import safetensors.torch
import torch
from pretrain_helpers import TINY, assert_runs_identical, final_weights, make_config, metrics
from safetensors import SafetensorError
from transformers import AutoModelForMaskedLM

from metaxlm import io
from metaxlm.cli import main as cli_main
from metaxlm.config import CorpusSpec, ModelConfig, PrepareConfig, load_config
from metaxlm.errors import DataError, DiskFull
from metaxlm.models import build_mlm, checkpoint
from metaxlm.pretrain.engine import RunLog
from metaxlm.run.layout import VariantDir
from metaxlm.vocab import load_tokenizer

pytestmark = pytest.mark.usefixtures("one_thread")

BENCH = Path(__file__).resolve().parents[1] / "bench" / "disk_full.py"
_spec = importlib.util.spec_from_file_location("disk_full_bench", BENCH)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)  # top-level imports are stdlib only: cheap

KINDS = ("ENOSPC", "SafetensorError", "unexpected pos")


@pytest.fixture(autouse=True)
def warm_bench_runs(monkeypatch):
    """The bench's `metaxlm` commands forked warm (see warm_cli), in the workers' one-thread environment; their CPU
    time is not measured here (the bench's own runs measure it)."""
    import time

    import warm_cli

    def metaxlm(*args: str):
        started = time.perf_counter()
        done = warm_cli.run(list(args))
        done.seconds, done.cpu_seconds = time.perf_counter() - started, float("nan")
        return done

    monkeypatch.setattr(bench, "metaxlm", metaxlm)


@pytest.fixture
def disk(monkeypatch):
    """The filesystem as metaxlm sees it: `disk.full` from an injected failure on (free space 0, as a real full disk
    shows it), until the test frees space (`disk.full = False`)."""
    real = io.free_bytes
    state = SimpleNamespace(full=False)
    monkeypatch.setattr(io, "free_bytes", lambda path: 0 if state.full else real(path))
    return state


def fail(disk, kind: str, path) -> None:
    """Raise what a real full disk raised while writing `path`."""
    disk.full = True
    if kind == "ENOSPC":
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
    if kind == "SafetensorError":
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")
    try:  # torch.save to a path: no errno anywhere, only the stream's failure
        raise RuntimeError("basic_ios::clear: iostream error")
    except RuntimeError:
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534") from None


def write_partial(path) -> None:
    Path(path).write_bytes(b"\x00" * 1000)  # what the failed write left behind


# -- what counts as a full disk ------------------------------------------------------------------------------------
def test_a_full_disk_is_recognized_by_errno_text_or_free_space(tmp_path, disk):
    target = tmp_path / "f"
    chained = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598")
    chained.__context__ = OSError(errno.ENOSPC, "No space left on device")  # torch.save to a Python file object
    for err in (OSError(errno.ENOSPC, "No space left on device"), OSError(errno.EDQUOT, "Disk quota exceeded"),
                OSError("[Errno 28] Error writing bytes to file. Detail: [errno 28] No space left on device"),
                SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)"),
                chained):
        assert io.is_disk_full(err, target), err
    silent = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534")
    for err in (silent, OSError(errno.EACCES, "Permission denied"), ValueError("bad")):
        assert not io.is_disk_full(err, target), err  # free space on tmp_path: not a full disk
    disk.full = True
    assert io.is_disk_full(silent, target)  # no errno, no text: the free space says it
    assert not io.is_disk_full(ValueError("bad"), target)  # not an I/O error, whatever the free space


def test_disk_full_message_and_pickling(tmp_path):
    err = DiskFull(tmp_path / "x", what="checkpoint", part="optimizer.pt", mount="/data", free_at_failure=0,
                   free_after=1_500_000, kept="The last good checkpoint c is intact.", rerun="then rerun with --resume")
    assert str(err) == (f"disk full while writing checkpoint {tmp_path / 'x'} (optimizer.pt): no space left on device "
                        "(1.50 MB free on /data with the partial files removed). The last good checkpoint c is intact. "
                        "Free space on /data, then rerun with --resume.")
    import pickle

    assert str(pickle.loads(pickle.dumps(err))) == str(err)  # prepare's workers send it to the parent


# -- checkpoints ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def trained(tokenizer_dir):
    """A tiny model one optimizer step in, with its optimizer and scheduler (what save_checkpoint writes)."""
    tok = load_tokenizer(tokenizer_dir)
    model = build_mlm(ModelConfig(**TINY), tok)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
    ids = torch.randint(5, len(tok) - 1, (2, 16))
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    scheduler.step()
    return SimpleNamespace(model=model, optimizer=optimizer, scheduler=scheduler)


def save(trained, root: Path, step: int) -> Path:
    return checkpoint.save_checkpoint(root, step, model=trained.model, optimizer_state=trained.optimizer.state_dict(),
                                      scheduler=trained.scheduler, state={"tokens": step}, keep=5,
                                      objectives_state={"moco.queue": torch.arange(12.0).reshape(3, 4)})


def inject_checkpoint_fault(monkeypatch, disk, trained, point: str, kind: str) -> None:
    """Make the next write of `point` fail as a full disk does (once: the disk is "freed" afterwards)."""
    armed = {"on": True}

    def firing() -> bool:
        fire, armed["on"] = armed["on"], False
        return fire

    if point == "model weights":
        real = trained.model.save_pretrained

        def save_pretrained(save_directory, **kw):
            if not firing():
                return real(save_directory, **kw)
            write_partial(Path(save_directory) / "model.safetensors")
            fail(disk, kind, save_directory)

        monkeypatch.setattr(trained.model, "save_pretrained", save_pretrained)
    elif point == "objectives":
        real_file = safetensors.torch.save_file

        def save_file(tensors, filename, *a, **k):
            if not (str(filename).endswith(checkpoint.OBJECTIVES_FILE) and firing()):
                return real_file(tensors, filename, *a, **k)
            write_partial(filename)
            fail(disk, kind, filename)

        monkeypatch.setattr(safetensors.torch, "save_file", save_file)
    elif point == "optimizer":
        real_save = torch.save

        def torch_save(obj, f, *a, **k):
            if not (str(getattr(f, "name", f)).endswith("optimizer.pt") and firing()):
                return real_save(obj, f, *a, **k)
            f.write(b"PK\x03\x04 partial")
            fail(disk, kind, f.name)

        monkeypatch.setattr(checkpoint.torch, "save", torch_save)
    else:  # trainer_state, checksums, latest: small JSON/text files written by metaxlm.io
        name = {"trainer_state": "trainer_state.json", "checksums": checkpoint.CHECKSUMS, "latest": "latest"}[point]
        real_text = Path.write_text

        def write_text(self, data, *a, **k):
            if not (self.name.startswith(f".{name}.") and firing()):
                return real_text(self, data, *a, **k)
            real_text(self, data[: len(data) // 2], *a, **k)
            fail(disk, kind, self)

        monkeypatch.setattr(Path, "write_text", write_text)


CHECKPOINT_POINTS = {"model weights": "model.safetensors", "objectives": "objectives.safetensors",
                     "optimizer": "optimizer.pt", "trainer_state": "trainer_state.json",
                     "checksums": "checksums.json", "latest": None}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("point", list(CHECKPOINT_POINTS))
def test_checkpoint_write_on_a_full_disk(trained, tmp_path, monkeypatch, disk, point, kind):
    root = tmp_path / "ckpt"
    good = save(trained, root, 3)
    inject_checkpoint_fault(monkeypatch, disk, trained, point, kind)
    with pytest.raises(DiskFull) as caught:
        save(trained, root, 6)
    message = str(caught.value)
    what = f"the checkpoint pointer {root / 'latest'} (to step_00000006)" if point == "latest" else \
        f"checkpoint {root / 'step_00000006'} ({CHECKPOINT_POINTS[point]})"
    assert message.startswith(f"disk full while writing {what}: no space left on device ("), message
    assert f"free on {io.mount_point(tmp_path)} with the partial files removed)" in message
    assert message.endswith(f"The last good checkpoint {good} is intact. Free space on {io.mount_point(tmp_path)}, "
                            f"then rerun with --resume.")
    # the last good checkpoint is intact; the partial one (even a complete but unpublished one) is gone
    assert sorted(p.name for p in root.iterdir()) == ["latest", "step_00000003"]
    assert checkpoint.latest_checkpoint(root) == good
    checkpoint.verify_checkpoint(good)
    AutoModelForMaskedLM.from_pretrained(str(good))
    disk.full = False  # space freed: the same save now succeeds
    assert checkpoint.latest_checkpoint(root) == good and save(trained, root, 6) == checkpoint.latest_checkpoint(root)
    checkpoint.verify_checkpoint(root / "step_00000006")


def test_the_first_checkpoint_on_a_full_disk_says_to_start_again(trained, tmp_path, monkeypatch, disk):
    inject_checkpoint_fault(monkeypatch, disk, trained, "optimizer", "ENOSPC")
    with pytest.raises(DiskFull, match=r"No earlier checkpoint was written\. Free space on .*, then run the same "
                                       r"command again \(without --resume\)\.$"):
        save(trained, tmp_path / "ckpt", 3)
    assert list((tmp_path / "ckpt").iterdir()) == []


def test_another_write_error_stays_itself_but_leaves_nothing_behind(trained, tmp_path, monkeypatch, disk):
    root = tmp_path / "ckpt"
    save(trained, root, 3)
    inject_checkpoint_fault(monkeypatch, disk, trained, "optimizer", "unexpected pos")
    monkeypatch.setattr(io, "free_bytes", lambda path: 10 << 30)  # plenty of space: not a full disk
    with pytest.raises(RuntimeError, match="unexpected pos"):
        save(trained, root, 6)
    assert sorted(p.name for p in root.iterdir()) == ["latest", "step_00000003"]


# -- metrics.jsonl and TensorBoard -----------------------------------------------------------------------------------
def fake_run_dir(tmp_path) -> VariantDir:
    """A variant directory with a (minimal) checkpoint that `latest` names."""
    layout = VariantDir(tmp_path / "pretrain" / "xlm")
    (layout.ckpt / "step_00000004").mkdir(parents=True)
    (layout.ckpt / "step_00000004" / "trainer_state.json").write_text('{"step": 4}')
    (layout.ckpt / "latest").write_text("step_00000004\n")
    return layout


def test_a_metrics_append_on_a_full_disk_is_cut_back(tmp_path, monkeypatch, disk):
    layout = fake_run_dir(tmp_path)
    log = RunLog(layout, main=True, start=0, resume=False)
    for step in (1, 2):
        log({"step": step, "loss": 1.0 / step})
    before = layout.metrics.read_bytes()

    class HalfWrite:  # the kernel took half the line, then ENOSPC
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, text):
            self.f.write(text[: len(text) // 2])
            self.f.flush()
            fail(disk, "ENOSPC", layout.metrics)

    monkeypatch.setattr(io, "open", lambda *a, **k: HalfWrite(open(*a, **k)), raising=False)
    with pytest.raises(DiskFull) as caught:
        log({"step": 3, "loss": 0.3})
    assert str(caught.value).startswith(f"disk full while writing the metrics log {layout.metrics}: no space left")
    assert str(caught.value).endswith(f"The last good checkpoint {layout.ckpt / 'step_00000004'} is intact. Free "
                                      f"space on {io.mount_point(tmp_path)}, then rerun with --resume.")
    assert layout.metrics.read_bytes() == before  # no partial line


def test_resume_drops_a_line_left_incomplete_and_refuses_a_corrupt_one(tmp_path):
    layout = fake_run_dir(tmp_path)
    lines = [json.dumps({"step": s, "loss": 1.0}) for s in range(1, 7)]
    layout.metrics.write_text("\n".join(lines[:5]) + "\n" + lines[5][:9])  # killed mid-append
    RunLog(layout, main=True, start=4, resume=True)
    assert layout.metrics.read_text() == "\n".join(lines[:4]) + "\n"
    layout.metrics.write_text("\n".join(lines[:5]) + "\n")  # complete: unchanged but the steps after 4
    RunLog(layout, main=True, start=6, resume=True)
    assert layout.metrics.read_text() == "\n".join(lines[:5]) + "\n"
    layout.metrics.write_text(lines[0] + "\n{garbage\n" + lines[2] + "\n")
    with pytest.raises(DataError, match=r"metrics\.jsonl:2: not a JSON line"):
        RunLog(layout, main=True, start=4, resume=True)


def test_a_tensorboard_write_on_a_full_disk(tmp_path, monkeypatch, disk):
    pytest.importorskip("torch.utils.tensorboard")
    layout = fake_run_dir(tmp_path)
    log = RunLog(layout, main=True, start=0, resume=False)
    monkeypatch.setattr(log.writer, "add_scalar", lambda *a, **k: fail(disk, "ENOSPC", layout.tensorboard))
    with pytest.raises(DiskFull, match=rf"^disk full while writing the TensorBoard log {layout.tensorboard}: .* "
                                       r"then rerun with --resume\.$"):
        log({"step": 1, "loss": 1.0})
    assert metrics(layout.root) == [{"step": 1, "loss": 1.0}]  # the JSON line is complete


# -- prepare and evaluation ------------------------------------------------------------------------------------------
def test_an_arrow_shard_write_on_a_full_disk(corpora, tokenizer_dir, run_template, tmp_path, monkeypatch, disk):
    import datasets

    from metaxlm.data.prepare import prepare_corpora

    out = tmp_path / "prepared"
    shutil.copytree(run_template / "prepared", out)  # an earlier prepare: it must survive
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    real = datasets.Dataset.save_to_disk

    def save_to_disk(self, dataset_path, *a, **k):
        Path(dataset_path).mkdir(parents=True, exist_ok=True)
        write_partial(Path(dataset_path) / "data-00000-of-00001.arrow")
        fail(disk, "ENOSPC", dataset_path)

    monkeypatch.setattr(datasets.Dataset, "save_to_disk", save_to_disk)
    with pytest.raises(DiskFull) as caught:
        prepare_corpora({"zh": CorpusSpec(path=str(corpora["zh"]))}, {}, tokenizer_dir, out,
                        PrepareConfig(num_proc=1), progress=False)
    message = str(caught.value)
    assert message.startswith(f"disk full while writing Arrow data {out} (mono/zh): no space left on device"), message
    assert message.endswith(f"The earlier {out} is intact. Free space on {io.mount_point(tmp_path)}, then run the "
                            f"same command again.")
    assert sorted(tmp_path.iterdir()) == [out]  # no temporary directory left behind
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    monkeypatch.setattr(datasets.Dataset, "save_to_disk", real)


def test_evaluation_results_on_a_full_disk(run_template, tmp_path, monkeypatch, disk):
    from metaxlm.evaluation.recipe import ModelToEvaluate, evaluate_model

    cfg = load_config(make_config(run_template, tmp_path))
    real_text = Path.write_text

    def write_text(self, data, *a, **k):
        if self.name.startswith(".results.json."):
            real_text(self, data[:10], *a, **k)
            fail(disk, "ENOSPC", self)
        return real_text(self, data, *a, **k)

    monkeypatch.setattr(Path, "write_text", write_text)
    out = tmp_path / "run" / "eval" / "m"
    with pytest.raises(DiskFull) as caught:
        evaluate_model(cfg, ModelToEvaluate("m", tmp_path, tmp_path))
    assert str(caught.value).startswith(f"disk full while writing evaluation results {out / 'results.json'}: ")
    assert f"The evaluation parts already stored in {out / 'parts'} are intact and the rerun reuses them." in \
        str(caught.value)
    assert list(out.iterdir()) == []


# -- whole runs: the CLI's one line, and --resume equal to the uninterrupted run --------------------------------------
STEPS = 6


@pytest.fixture(scope="module")
def reference(run_template, tmp_path_factory):
    """The uninterrupted run (6 steps, checkpoints at 3 and 6), through the CLI in this process."""
    root = tmp_path_factory.mktemp("disk_full_reference")
    cfg = make_config(run_template, root, precision="fp32")
    assert cli_main(["pretrain", str(cfg), "--no-progress"]) == 0
    return root / "run" / "pretrain" / "xlm"


def run_cli(capsys, *args) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = cli_main(list(args))
    return code, capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize("point", ["optimizer at step 6", "metrics at step 4", "final model"])
def test_pretrain_stops_with_one_line_and_resumes_exactly(run_template, reference, tmp_path, monkeypatch, disk,
                                                          capsys, point):
    cfg = make_config(run_template, tmp_path, precision="fp32")
    vdir = tmp_path / "run" / "pretrain" / "xlm"
    armed = {"on": True}
    if point.startswith("optimizer"):  # torch.save's silent RuntimeError: recognized by the free space alone
        real_save = torch.save

        def torch_save(obj, f, *a, **k):
            if str(getattr(f, "name", "")).endswith("step_00000006/optimizer.pt") and armed.pop("on", False):
                f.write(b"PK partial")
                fail(disk, "unexpected pos", f.name)
            return real_save(obj, f, *a, **k)

        monkeypatch.setattr(checkpoint.torch, "save", torch_save)
        expected = f"disk full while writing checkpoint {vdir / 'ckpt' / 'step_00000006'} (optimizer.pt)"
        last_good = "step_00000003"
    elif point.startswith("metrics"):  # half a line written, then ENOSPC
        real_open, appends = open, {"n": 0}

        def open_metrics(file, mode="r", *a, **k):
            f = real_open(file, mode, *a, **k)
            if mode == "a" and str(file).endswith("metrics.jsonl"):
                appends["n"] += 1
                if appends["n"] == 6:  # the records of steps 0 (eval), 1, 2, 3, 3 (eval), then step 4's
                    real_write = f.write

                    def write(text):
                        real_write(text[: len(text) // 2])
                        f.flush()
                        fail(disk, "ENOSPC", file)

                    f.write = write
            return f

        monkeypatch.setattr(io, "open", open_metrics, raising=False)
        expected = f"disk full while writing the metrics log {vdir / 'metrics.jsonl'}"
        last_good = "step_00000003"
    else:  # the final export: the last checkpoint (step 6) is the one to resume from
        from transformers import PreTrainedModel

        real_pretrained = PreTrainedModel.save_pretrained

        def save_pretrained(self, save_directory, *a, **k):
            if Path(save_directory).name.startswith(".final."):
                write_partial(Path(save_directory) / "model.safetensors")
                fail(disk, "SafetensorError", save_directory)
            return real_pretrained(self, save_directory, *a, **k)

        monkeypatch.setattr(PreTrainedModel, "save_pretrained", save_pretrained)
        expected = f"disk full while writing {vdir / 'final'}"
        last_good = "step_00000006"

    code, err = run_cli(capsys, "pretrain", str(cfg), "--no-progress")
    assert code == 2 and len(err) == 1, err  # one line, no traceback
    assert err[0].startswith(f"metaxlm: error: {expected}: no space left on device ("), err[0]
    assert err[0].endswith(f"The last good checkpoint {vdir / 'ckpt' / last_good} is intact. Free space on "
                           f"{io.mount_point(tmp_path)}, then rerun with --resume."), err[0]
    assert not [p for p in vdir.rglob(".*")], "hidden temporary files left behind"
    checkpoint.verify_checkpoint(vdir / "ckpt" / last_good)
    AutoModelForMaskedLM.from_pretrained(str(vdir / "ckpt" / last_good))
    assert all(line.endswith("}") for line in (vdir / "metrics.jsonl").read_text().splitlines())

    disk.full = False  # free space, then --resume
    monkeypatch.undo()
    code, err = run_cli(capsys, "pretrain", str(cfg), "--no-progress", "--resume")
    assert code == 0, err
    assert_runs_identical(reference, vdir, STEPS, files=("model.safetensors",))  # MLM only: no objectives file
    ref_final, final = final_weights(reference), final_weights(vdir)
    assert ref_final.keys() == final.keys() and all(torch.equal(ref_final[k], final[k]) for k in final)


# -- for real, on a small tmpfs --------------------------------------------------------------------------------------
def mounted_or_skip(scenario, *args, **kwargs) -> dict:
    try:
        return scenario(*args, **kwargs)
    except bench.CannotMount as why:
        pytest.skip(f"no tmpfs for the real full-disk check: {why}")


def test_pretrain_on_a_full_tmpfs(run_template, reference, tmp_path):
    cfg = make_config(run_template, tmp_path, precision="fp32")
    record = mounted_or_skip(bench.pretrain_scenario, cfg, run_template, reference, tmp_path, fail_in="optimizer.pt",
                             steps=STEPS)
    full = record["full_disk"]
    assert full["exit_code"] == 2 and not full["traceback"] and len(full["error_lines"]) == 1, full
    assert full["message"].startswith("metaxlm: error: disk full while writing checkpoint "), full["message"]
    assert "step_00000006 (optimizer.pt): no space left on device (" in full["message"]
    assert full["message"].endswith("step_00000003 is intact. Free space on "
                                    f"{tmp_path / 'run-optimizer' / 'pretrain'}, then rerun with --resume.")
    assert full["leftovers"] == []
    assert record["last_checkpoint"] == {**record["last_checkpoint"], "name": "step_00000003", "verifies": True,
                                         "loads": True}
    assert record["resume"]["finished"] and record["resume"]["equals_uninterrupted"] is True, record["resume"]


def test_prepare_on_a_full_tmpfs(corpora, run_template, tmp_path):
    import yaml

    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump({"output_dir": str(tmp_path / "unused"),
                                   "data": {"languages": sorted(corpora),
                                            "mono": str(corpora["en"].parent / "{lang}.txt")},
                                   "prepare": {"num_proc": 1, "heldout_texts": 20}}))
    record = mounted_or_skip(bench.prepare_scenario, cfg, run_template / "vocab", run_template / "prepared", tmp_path)
    full = record["full_disk"]
    assert full["exit_code"] == 2 and not full["traceback"] and len(full["error_lines"]) == 1, full
    mount = tmp_path / "prepare-run"
    assert full["message"].startswith(f"metaxlm: error: disk full while writing Arrow data {mount / 'prepared'} ("), \
        full["message"]
    assert full["message"].endswith(f"Nothing was written to {mount / 'prepared'}. Free space on {mount}, then run "
                                    f"the same command again.")
    assert full["leftovers"] == [] and not full["prepared_exists"]
    assert record["rerun"]["finished"] and record["rerun"]["equals_reference"] is True, record["rerun"]
