"""bench/evaluation_profile.py: every function it times exists where the evaluation looks it up, and each second
is charged to the innermost open section once."""

import importlib.util
import inspect
import re
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "evaluation_profile.py"
spec = importlib.util.spec_from_file_location("evaluation_profile", SCRIPT)
evaluation_profile = importlib.util.module_from_spec(spec)
spec.loader.exec_module(evaluation_profile)  # top-level imports are stdlib only: cheap


def test_every_timed_function_is_called_through_the_module_it_is_patched_in(monkeypatch):
    sections = evaluation_profile.Sections()
    patched = []

    def patch(owner, name, section):  # undone after the test: other tests in this process see the real functions
        patched.append((owner, name))
        monkeypatch.setattr(owner, name, sections.wrap(section, getattr(owner, name)))

    monkeypatch.setattr(sections, "patch", patch)
    evaluation_profile.instrument(sections)  # an AttributeError here: a timed function moved
    assert len(patched) > 10
    import metaxlm

    everywhere = "\n".join(path.read_text() for path in Path(metaxlm.__file__).parent.rglob("*.py"))
    for owner, name in patched:
        if inspect.ismodule(owner):  # timed only if called by that module's global or as the module's attribute
            source = inspect.getsource(owner)
            # used by its own module's global (a call, or a reference handed on) besides its definition
            called_inside = len(re.findall(rf"\b{name}\b", source)) > source.count(f"def {name}(")
            # an import inside a function looks the name up in the module when it runs, so it sees the patch
            imported_late = re.search(rf"^[ \t]+from {re.escape(owner.__name__)} import [^\n]*\b{name}\b", everywhere,
                                      re.MULTILINE)
            assert called_inside or imported_late or f".{name}(" in everywhere, \
                f"nothing calls {name} through {owner.__name__}"


def test_sections_charge_each_interval_to_the_innermost_section():
    sections = evaluation_profile.Sections()
    inner = sections.wrap("inner", lambda: time.sleep(0.05))

    def outer_body():
        time.sleep(0.05)
        inner()

    outer = sections.wrap("outer", outer_body)
    sections.mark = began = time.perf_counter()
    outer()
    sections._charge()
    total = time.perf_counter() - began
    assert sections.calls == {"outer": 1, "inner": 1}
    assert sections.seconds["inner"] >= 0.05 and sections.seconds["outer"] >= 0.05
    assert abs(sum(sections.seconds.values()) - total) < 1e-3  # nothing counted twice, nothing lost
