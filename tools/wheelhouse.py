"""A wheelhouse for a GPU node without network: metaxlm's wheel and every pinned package it needs, in one folder.

    python -m tools.wheelhouse --out wheelhouse --python 3.12 --platform manylinux_2_28_x86_64   (make wheelhouse)

Why: a cluster's GPU nodes often reach no package index. On a machine with network this writes the folder to copy
there; on the node `pip install --no-index --find-links wheelhouse/ metaxlm` then installs metaxlm beside the node's
own torch (docs/scale-out.md, "GPU node without network").

What goes in: the runtime requirements of metaxlm's wheel (pyproject's [project.dependencies]; not the dev or bench
extras) and, transitively, theirs, each at its constraints.txt pin — the versions the tests run with — for the
target Python and platform (markers evaluated for it). A package constraints.txt does not pin (pip's freeze leaves
out setuptools) gets the version installed beside this tool. Left out: torch and what only torch brings (the CUDA
libraries nvidia-*, triton): the node's CUDA build of torch is used, and one for another machine is gigabytes.

How: the closure is computed in rounds; each round `pip download --no-deps --only-binary=:all:` fetches the
wheels found so far for the target (not for this machine), and their METADATA names the next round's packages. A
package published as a source archive only gets a wheel built here (`pip wheel --no-deps`), accepted when it is
pure Python (`*-none-any.whl`). Written into a temporary folder beside `--out`, which replaces `--out` only when
complete, with `manifest.json`: the target, each file with its size and sha256, the packages and who requires them,
and what was left out and who asked for it. Errors (no wheel for the target, a requirement its pin does not
satisfy, a package with no pin) are one line each, exit status 2.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from collections.abc import Callable, Iterable
from email.parser import Parser
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

from metaxlm.errors import MetaXLMError
from metaxlm.io import atomic_dir

ROOT = Path(__file__).resolve().parents[1]
PROJECT = "metaxlm"
DEFAULT_PYTHON = "3.12"
DEFAULT_PLATFORM = "manylinux_2_28_x86_64"
EXCLUDED_NAMES = {"torch", "triton", "pytorch-triton"}  # and every nvidia-* package
MANIFEST = "manifest.json"
FREEZE_LEAVES_OUT = ("pip", "setuptools", "wheel")  # not in constraints.txt: pinned at the version installed here


class WheelhouseError(MetaXLMError):
    """Why the wheelhouse cannot be written (one line)."""


def excluded(name: str) -> bool:
    """torch and the CUDA libraries that come with it: the node has its own."""
    name = canonicalize_name(name)
    return name in EXCLUDED_NAMES or name.startswith("nvidia-")


def read_pins(constraints: Path) -> dict[str, str]:
    """`name==version` lines of a constraints file, by normalized name (`name @ url` lines are skipped)."""
    pins = {}
    for line in constraints.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line and "@" not in line:
            name, version = (part.strip() for part in line.split("==", 1))
            pins[canonicalize_name(name)] = version
    return pins


def project_requirements(pyproject: Path) -> list[str]:
    """[project.dependencies] of a pyproject.toml: the requirements metaxlm's wheel declares."""
    return tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"]


def target_environment(python: str, platform: str) -> dict[str, str]:
    """The marker environment of CPython `python` on a Linux wheel platform tag (manylinux_2_28_x86_64, ...)."""
    if not re.fullmatch(r"3\.\d+(\.\d+)?", python):
        raise WheelhouseError(f"--python {python}: give a CPython version such as 3.12")
    found = re.fullmatch(r"(?:manylinux_\d+_\d+|manylinux\d+|musllinux_\d+_\d+|linux)_(x86_64|aarch64|ppc64le|s390x)",
                         platform)
    if not found:
        raise WheelhouseError(f"--platform {platform}: give a Linux wheel platform tag such as {DEFAULT_PLATFORM}")
    short = ".".join(python.split(".")[:2])
    return {**default_environment(), "implementation_name": "cpython", "platform_python_implementation": "CPython",
            "python_version": short, "python_full_version": python if python.count(".") == 2 else f"{python}.0",
            "implementation_version": python, "os_name": "posix", "sys_platform": "linux", "platform_system": "Linux",
            "platform_machine": found.group(1), "platform_release": "", "platform_version": ""}


LEGACY_MANYLINUX = {"manylinux2014": 17, "manylinux2010": 12, "manylinux1": 5}  # glibc 2.x of the old names


def platform_tags(platform: str) -> list[str]:
    """The wheel platform tags a Linux system of tag `platform` runs, newest first: manylinux_2_28_x86_64 takes
    manylinux_2_17 (manylinux2014) wheels too. pip's `--platform` takes only the tags it is given (it widens
    manylinux2014 and manylinux2010 alone), so each is passed."""
    found = re.fullmatch(r"(manylinux|musllinux)_(\d+)_(\d+)_(\w+)|(manylinux\d+)_(\w+)", platform)
    if not found:
        return [platform]
    if found.group(5):
        kind, major, minor, arch = "manylinux", 2, LEGACY_MANYLINUX.get(found.group(5), 17), found.group(6)
    else:
        kind, major, minor, arch = found.group(1), int(found.group(2)), int(found.group(3)), found.group(4)
    if kind == "musllinux":
        return [f"musllinux_{major}_{m}_{arch}" for m in range(minor, -1, -1)]
    tags = []
    for m in range(minor, 4, -1):
        tags.append(f"manylinux_{major}_{m}_{arch}")
        tags += [f"{legacy}_{arch}" for legacy, glibc in LEGACY_MANYLINUX.items() if glibc == m and major == 2
                 and (legacy == "manylinux2014" or arch in ("x86_64", "i686"))]
    return tags


def applies(req: Requirement, env: dict[str, str], extras: Iterable[str]) -> bool:
    """Whether a requirement counts in `env` for a package wanted with `extras`."""
    if req.marker is None:
        return True
    return any(req.marker.evaluate({**env, "extra": extra}) for extra in ("", *extras))


def closure(roots: list[str], pins: dict[str, str], requires: Callable[[dict[str, str]], dict[str, list[str]]],
            env: dict[str, str], *, root_name: str = PROJECT) -> tuple[dict[str, dict], dict[str, list[str]]]:
    """Every package `roots` need in `env`, transitively, at its pin, torch and its CUDA libraries left out.

    `requires({name: version})` gives each package's Requires-Dist lines (called once per round with the packages
    found in it: the tool downloads their wheels, the tests read installed metadata). Returns ({name: {"version",
    "required_by"}}, {left-out name: [who requires it]})."""
    known: dict[str, list[str]] = {}       # name -> its Requires-Dist
    while True:
        found: dict[str, dict] = {}
        left_out: dict[str, set[str]] = {}
        wanted: dict[str, set[str]] = {}   # name -> extras asked for
        todo = [(root_name, r) for r in roots]
        missing: dict[str, str] = {}
        while todo:
            parent, line = todo.pop()
            req = Requirement(line)
            parent_extras = wanted.get(parent, set())
            if not applies(req, env, parent_extras):
                continue
            name = canonicalize_name(req.name)
            if excluded(name):
                left_out.setdefault(name, set()).add(parent)
                continue
            version = pins.get(name)
            if version is None:
                raise WheelhouseError(f"{req.name} (required by {parent}) has no pin in constraints.txt")
            if not req.specifier.contains(version, prereleases=True):
                raise WheelhouseError(f"{parent} requires {req}, but the pin is {req.name}=={version}")
            entry = found.setdefault(name, {"version": version, "required_by": set()})
            entry["required_by"].add(parent)
            new_extras = set(req.extras) - wanted.get(name, set())
            first = name not in wanted
            wanted.setdefault(name, set()).update(req.extras)
            if not first and not new_extras:
                continue
            if name in known:
                todo += [(name, r) for r in known[name]]
            else:
                missing[name] = version
        if not missing:
            break
        known.update(requires(missing))
        for name in missing:
            if name not in known:
                raise WheelhouseError(f"no metadata for {name}=={missing[name]}")
    packages = {n: {"version": e["version"], "required_by": sorted(e["required_by"])} for n, e in sorted(found.items())}
    return packages, {n: sorted(by) for n, by in sorted(left_out.items())}


def installed_pins(names: Iterable[str] = FREEZE_LEAVES_OUT) -> dict[str, str]:
    """The installed version of packages constraints.txt does not pin (pip's freeze leaves them out)."""
    pins = {}
    for name in names:
        try:
            pins[canonicalize_name(name)] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return pins


def installed_requires(packages: dict[str, str]) -> dict[str, list[str]]:
    """Requires-Dist of installed distributions (what `closure` asks for), for a wheelhouse of this machine's
    environment: the tests use it offline."""
    out = {}
    for name in packages:
        try:
            out[name] = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            pass
    return out


# -- the wheels -------------------------------------------------------------------------------------------------
def wheel_metadata(path: Path) -> dict[str, list[str] | str]:
    """Name, Version and the Requires-Dist lines of a wheel (its .dist-info/METADATA)."""
    with zipfile.ZipFile(path) as whl:
        name = next((n for n in whl.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)), None)
        if name is None:
            raise WheelhouseError(f"{path.name}: no .dist-info/METADATA in the wheel")
        meta = Parser().parsestr(whl.read(name).decode("utf-8"))
    return {"name": meta["Name"], "version": meta["Version"], "requires": meta.get_all("Requires-Dist") or []}


def _pip(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, check=False)


def _last_error(done: subprocess.CompletedProcess) -> str:
    lines = [ln.strip() for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ERROR")]
    return (errors[:1] or lines[-1:] or [f"exit status {done.returncode}"])[0]


class Downloader:
    """Fetches pinned wheels for the target into `folder` and reads their requirements (`closure`'s `requires`)."""

    def __init__(self, folder: Path, python: str, platform: str, log: Callable[[str], None] = print):
        self.folder, self.python, self.platform, self.log = folder, python, platform, log
        self.wheels: dict[str, Path] = {}
        self.built: list[str] = []  # packages with no wheel on the index: built here (pure Python only)

    def target_args(self) -> list[str]:
        platforms = [arg for tag in platform_tags(self.platform) for arg in ("--platform", tag)]
        return ["--only-binary=:all:", *platforms, "--python-version", self.python, "--implementation", "cp"]

    def __call__(self, packages: dict[str, str]) -> dict[str, list[str]]:
        specs = [f"{n}=={v}" for n, v in sorted(packages.items())]
        self.log(f"wheelhouse: downloading {len(specs)} wheels ({', '.join(sorted(packages))})")
        done = _pip(["download", "--no-deps", "-q", "-d", str(self.folder), *self.target_args(), *specs])
        if done.returncode != 0:  # one at a time, to find the ones without a wheel for the target
            for spec in specs:
                one = _pip(["download", "--no-deps", "-q", "-d", str(self.folder), *self.target_args(), spec])
                if one.returncode != 0:
                    self.build(spec, _last_error(one))
        return self.collect(packages)

    def build(self, spec: str, why: str) -> None:
        """A wheel built here from the source archive, kept only when it is pure Python (any platform)."""
        with tempfile.TemporaryDirectory(prefix="wheelhouse-build-") as tmp:
            done = _pip(["wheel", "--no-deps", "-q", "-w", tmp, spec])
            made = sorted(Path(tmp).glob("*.whl"))
            if done.returncode != 0 or not made:
                raise WheelhouseError(f"{spec}: no wheel for CPython {self.python} on {self.platform} ({why}), and "
                                      f"building one failed: {_last_error(done)}")
            if not made[0].name.endswith("-none-any.whl"):
                raise WheelhouseError(f"{spec}: no wheel for CPython {self.python} on {self.platform} ({why}), and "
                                      f"the one built here ({made[0].name}) is for this machine only")
            made[0].replace(self.folder / made[0].name)
        self.built.append(spec)
        self.log(f"wheelhouse: {spec}: no wheel on the index, one built here from its source (pure Python)")

    def collect(self, packages: dict[str, str]) -> dict[str, list[str]]:
        """Requires-Dist of each of `packages` from its wheel in the folder."""
        for path in self.folder.glob("*.whl"):
            name = canonicalize_name(parse_wheel_filename(path.name)[0])
            if name in packages and name not in self.wheels:
                meta = wheel_metadata(path)
                if str(meta["version"]) != packages[name]:
                    raise WheelhouseError(f"{path.name}: version {meta['version']}, expected {packages[name]}")
                self.wheels[name] = path
        missing = sorted(set(packages) - set(self.wheels))
        if missing:
            raise WheelhouseError(f"pip download gave no wheel for {', '.join(missing)}")
        return {name: list(wheel_metadata(self.wheels[name])["requires"]) for name in packages}


BUILD_INPUTS = ("pyproject.toml", "README.md", "LICENSE", "setup.py", "setup.cfg", "MANIFEST.in")


def build_project_wheel(folder: Path, source: Path = ROOT, *, isolated: bool = True) -> Path:
    """metaxlm's own wheel (no dependencies) from the checkout `source`, into `folder`: built from a fresh copy of
    what the build reads (pyproject.toml, README.md, LICENSE, src/), so that no build/ is left in the checkout and
    none of an earlier build (a module since removed) gets into the wheel. `isolated=False`: with the setuptools
    installed here, no index asked (the tests build it offline)."""
    with tempfile.TemporaryDirectory(prefix="wheelhouse-project-") as tmp:
        copy = Path(tmp) / PROJECT
        shutil.copytree(source / "src", copy / "src",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
        for name in BUILD_INPUTS:
            if (source / name).is_file():
                shutil.copy2(source / name, copy / name)
        offline = [] if isolated else ["--no-build-isolation", "--no-index"]
        done = _pip(["wheel", "--no-deps", "-q", *offline, "-w", str(folder), str(copy)])
    made = sorted(folder.glob(f"{PROJECT}-*.whl"))
    if done.returncode != 0 or not made:
        raise WheelhouseError(f"building {PROJECT}'s wheel from {source} failed: {_last_error(done)}")
    return made[0]


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_wheelhouse(out: Path, python: str = DEFAULT_PYTHON, platform: str = DEFAULT_PLATFORM,
                     constraints: Path = ROOT / "constraints.txt", source: Path = ROOT,
                     log: Callable[[str], None] = print) -> dict:
    """Write the wheelhouse into `out` (replaced once complete); returns its manifest."""
    env = target_environment(python, platform)
    pins = {**installed_pins(), **read_pins(constraints)}
    start = time.perf_counter()
    with atomic_dir(out) as tmp:
        project = build_project_wheel(tmp, source)
        project_meta = wheel_metadata(project)
        log(f"wheelhouse: built {project.name}")
        fetch = Downloader(tmp, python, platform, log)
        roots = [r for r in project_meta["requires"] if applies(Requirement(r), env, ())]  # not the extras
        packages, left_out = closure(roots, pins, fetch, env)
        stray = sorted(p.name for p in tmp.glob("*.whl") if excluded(parse_wheel_filename(p.name)[0]))
        if stray:
            raise WheelhouseError(f"left-out packages ended up in the wheelhouse: {', '.join(stray)}")
        kept = {project.name} | {p.name for p in fetch.wheels.values()}
        for path in tmp.iterdir():  # anything pip left beside them (nothing expected)
            if path.name not in kept:
                path.unlink()
        files = [{"name": p.name, "bytes": p.stat().st_size, "sha256": sha256(p)} for p in sorted(tmp.glob("*.whl"))]
        manifest = {
            "wheelhouse": f"{PROJECT} {project_meta['version']} and its pinned runtime dependencies",
            "target": {"python": python, "implementation": "cp", "platform": platform,
                       "platform_tags": platform_tags(platform)},
            "made": time.strftime("%Y-%m-%d %H:%M:%S"), "seconds": round(time.perf_counter() - start, 1),
            "install": f"pip install --no-index --find-links {out.name}/ {PROJECT}",
            "project": {"name": PROJECT, "version": project_meta["version"], "wheel": project.name,
                        "requires": roots},
            "packages": packages, "built_here": fetch.built,
            "excluded": {"rule": "torch, triton and nvidia-*: the node's own CUDA torch is used",
                         "required_by": left_out},
            "files": files, "total_bytes": sum(f["bytes"] for f in files),
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.wheelhouse", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("wheelhouse"),
                        help="the folder (replaced; default wheelhouse)")
    parser.add_argument("--python", default=DEFAULT_PYTHON, help=f"target CPython version (default {DEFAULT_PYTHON})")
    parser.add_argument("--platform", default=DEFAULT_PLATFORM,
                        help=f"target wheel platform tag (default {DEFAULT_PLATFORM}: glibc 2.28 or newer)")
    parser.add_argument("--constraints", type=Path, default=ROOT / "constraints.txt", help="the pins")
    args = parser.parse_args(argv)
    try:
        manifest = write_wheelhouse(args.out, args.python, args.platform, args.constraints)
    except MetaXLMError as err:
        print(f"wheelhouse: error: {err}", file=sys.stderr)
        return 2
    left_out = ", ".join(manifest["excluded"]["required_by"]) or "nothing"
    print(f"wheelhouse: {len(manifest['files'])} wheels, {manifest['total_bytes'] / 1e6:.0f} MB, in {args.out} "
          f"(CPython {args.python}, {args.platform}; left out: {left_out}); on the node: "
          f"pip install --no-index --find-links {args.out}/ {PROJECT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
