"""The code a stored result was computed by (metaxlm.run.code): which modules count, and that an edit of one of them,
and only of one of them, changes the fingerprint."""

import pytest

from metaxlm.run import code


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A stand-in metaxlm package: `a` imports `b` inside a function and the package `reg` (a registry's, whose
    modules are imported on look-up); `c` is imported by nothing."""
    root = tmp_path / "metaxlm"
    (root / "reg").mkdir(parents=True)
    files = {"__init__.py": "", "a.py": "def f():\n    from metaxlm import b\n    from metaxlm.reg import get\n",
             "b.py": "X = 1\n", "c.py": "Y = 1\n", "reg/__init__.py": "def get(): ...\n", "reg/kind.py": "Z = 1\n"}
    for name, text in files.items():
        (root / name).write_text(text)
    monkeypatch.setattr(code, "PACKAGE", root)
    code.code_modules.cache_clear()
    code.code_fingerprint.cache_clear()
    yield root
    code.code_modules.cache_clear()
    code.code_fingerprint.cache_clear()


def test_an_edit_of_the_code_a_result_is_made_of_changes_its_fingerprint(package):
    assert list(code.code_modules("metaxlm.a")) == ["metaxlm", "metaxlm.a", "metaxlm.b", "metaxlm.reg",
                                                    "metaxlm.reg.kind"]
    before = code.code_fingerprint("metaxlm.a")
    for name, changes in (("c.py", False), ("b.py", True), ("reg/kind.py", True)):
        code.code_fingerprint.cache_clear()
        (package / name).write_text((package / name).read_text() + "# edited\n")
        assert (code.code_fingerprint("metaxlm.a") != before) is changes, name
        before = code.code_fingerprint("metaxlm.a")


def test_the_evaluation_code_is_what_evaluation_imports():
    """Fine-tuning's task types (found by the registry, imported by no module) count; the report, pretraining and
    the command line do not: a report's edit recomputes no part."""
    from metaxlm.evaluation.recipe import PART_CODE
    from metaxlm.finetune.summaries import RUN_CODE

    part = code.code_modules(*PART_CODE)
    run = code.code_modules(*RUN_CODE)
    assert {"metaxlm.finetune.tasks.translation", "metaxlm.features.retrieval", "metaxlm.metrics"} <= set(part)
    assert "metaxlm.finetune.tasks.qa" in run and "metaxlm.features.retrieval" not in run
    assert not [m for m in part if m.startswith(("metaxlm.report", "metaxlm.pretrain", "metaxlm.cli"))]
    assert len(code.code_fingerprint(*PART_CODE)) == 16


def test_an_entry_names_the_runs_made_by_other_code(monkeypatch):
    from metaxlm.finetune import summaries

    monkeypatch.setattr(code, "code_fingerprint", lambda *modules: "now")
    runs = [{"label": "de", "seed": 0, "code": {"fingerprint": "now", "commit": "a" * 40, "dirty": False}},
            {"label": "de", "seed": 1, "code": {"fingerprint": "old", "commit": "b" * 40, "dirty": True}},
            {"label": "fr", "seed": 0}]  # recorded before runs recorded their code: not known to differ
    assert summaries.other_code_note(runs) == ("runs made by other fine-tuning code than this one's, reused: de seed 1 "
                                               "(commit bbbbbbb dirty); delete a run's record to make it again")
    assert summaries.other_code_note(runs[::2]) == ""
