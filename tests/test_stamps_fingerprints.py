"""One stored-result layer (metaxlm.run.stamps): every fingerprint is made there, defined once, and makes the same
strings as before the fingerprints moved there — so an existing run still resumes its stored parts, finished
fine-tuning runs and checkpoints, and committed results still regenerate."""

from __future__ import annotations

import ast
import json
import types
from pathlib import Path

import pytest

from metaxlm.finetune import resume_key
from metaxlm.run import code as run_code
from metaxlm.run import stamps

PACKAGE = Path(stamps.__file__).resolve().parents[1]
# the mechanism of each fingerprint, and the one module allowed to define it
FINGERPRINTS = {"fingerprint": "run/stamps.py", "short_fingerprint": "run/stamps.py",
                "content_digest": "run/stamps.py", "model_fingerprint": "run/stamps.py",
                "get_or_compute": "run/stamps.py", "code_fingerprint": "run/code.py",
                "task_model_fingerprint": "finetune/resume_key.py", "run_fingerprint": "finetune/resume_key.py"}


def test_each_fingerprint_is_defined_once():
    defined: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name in {*FINGERPRINTS, "_fingerprint", "_stored_part"}:
                defined.setdefault(node.name, []).append(path.relative_to(PACKAGE).as_posix())
    assert defined == {name: [where] for name, where in FINGERPRINTS.items()}


def test_finetune_command_imports_nothing_of_evaluation():
    tree = ast.parse((PACKAGE / "cli.py").read_text(encoding="utf-8"))
    command = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "cmd_finetune")
    imported = [n.module for n in ast.walk(command) if isinstance(n, ast.ImportFrom)]
    assert "metaxlm.finetune.resume_key" in imported
    assert not [m for m in imported if m.startswith("metaxlm.evaluation")]


class _Spec:  # a task spec as the resume key reads it: its settings, and how a translation model is assembled
    def __init__(self, init: str | None = None):
        self.seq2seq = None if init is None else types.SimpleNamespace(init=init)

    def model_dump(self, mode: str = "python") -> dict:
        return {"name": "toy", "type": "classification",
                "seq2seq": None if self.seq2seq is None else {"init": self.seq2seq.init}}


@pytest.fixture
def model(tmp_path) -> Path:
    model = tmp_path / "model"
    (model / "veco").mkdir(parents=True)
    (model / "config.json").write_text('{"hidden_size": 8}')
    (model / "model.safetensors").write_bytes(bytes(range(256)) * 3)
    (model / "tokenizer.json").write_text('{"vocab": ["a", "b"]}')
    (model / "README.md").write_text("not fingerprinted")
    (model / "veco" / "config.json").write_text('{"veco": true}')
    (model / "veco" / "model.safetensors").write_bytes(b"veco weights")
    return model


def test_the_fingerprints_are_the_strings_they_were(model):
    """Computed by the code before the move (metaxlm.evaluation.recipe's model_fingerprint, task_model_fingerprint,
    run_fingerprint and _fingerprint; stamps' fingerprint and content_digest): a changed hash fails here."""
    settings = {"spec": {"a": 1}, "scenario": "zero_shot", "model": "m"}
    full = "3660476afc50481ea88b640c1f954ea1a6a5a4147f2550c4cb440cf746f95ad5"
    assert stamps.fingerprint(**settings) == full
    assert stamps.short_fingerprint(**settings) == full[:16]
    assert stamps.model_fingerprint(model, model) == "054df531ce75c2de"
    assert stamps.model_fingerprint(model, model, weights=False) == "7b7678a4f35ee33a"
    assert stamps.model_fingerprint(model, model, subfolders=("veco",)) == "c35aa451b00ced10"
    assert stamps.content_digest(model) == "97ebe7570c1e5a70"
    assert resume_key.task_model_fingerprint(_Spec(), model, model) == "054df531ce75c2de"
    assert resume_key.task_model_fingerprint(_Spec(), model, model, "given") == "given"
    assert resume_key.task_model_fingerprint(_Spec("random"), model, model, "given") == "7b7678a4f35ee33a"
    assert resume_key.task_model_fingerprint(_Spec("veco"), model, model, "given") == "c35aa451b00ced10"
    assert resume_key.run_fingerprint(_Spec(), "zero_shot", model_key="m") == "9f79b23c204387ad"
    assert resume_key.run_fingerprint(_Spec("veco"), "supervised", model, model) == "0f3082c03c1ba35a"


def test_get_or_compute_reuses_a_result_of_the_same_inputs_and_code(tmp_path, monkeypatch, capsys):
    path, calls = tmp_path / "part.json", []

    def compute():
        calls.append(1)
        return {"score": len(calls)}

    monkeypatch.setattr(run_code, "code_fingerprint", lambda *modules: "code-1")
    get = lambda digest: stamps.get_or_compute(path, digest, compute, code=("metaxlm.metrics",), what="test")  # noqa: E731
    assert get("a") == {"score": 1} and get("a") == {"score": 1} and calls == [1]
    assert set(json.loads(path.read_text())) == {"fingerprint", "code", "seconds", "result"}
    assert stamps.stored_result(path, "a", ("metaxlm.metrics",))[1]
    assert get("b") == {"score": 2}  # other inputs: computed again, silently
    monkeypatch.setattr(run_code, "code_fingerprint", lambda *modules: "code-2")
    capsys.readouterr()
    assert get("b") == {"score": 3}  # other code: computed again, saying so
    assert "part.json was computed by other code (code code-1, now code-2)" in capsys.readouterr().out
    assert json.loads(path.read_text())["code"] == "code-2"
