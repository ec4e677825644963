"""Fetch source packages (Debian .deb, PyPI wheel/sdist) into a cache and unpack them.

Nothing is installed: a .deb is opened with `dpkg-deb -x`, a wheel/sdist with zipfile/tarfile. Each unpacked tree lives in `cache_dir/unpacked/<name>_<version>/` and is
written to a temp dir first and renamed, so an interrupted fetch never leaves a half tree that a later
run would trust. A package already in the cache is reused without touching the network, so a rebuild
from a warm cache is offline and byte-identical.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from metaxlm.errors import MetaXLMError


class FetchError(MetaXLMError):
    """A source package could not be downloaded or unpacked (the message names it and says why)."""


@dataclass(frozen=True)
class Package:
    """An unpacked source package: `root` is the top of its file tree."""

    kind: str  # "deb" or "pypi"
    name: str
    version: str
    root: Path


def _run(cmd: list[str], cwd: Path, what: str) -> str:
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError as e:
        raise FetchError(f"cannot fetch {what}: `{cmd[0]}` is not installed ({e})") from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise FetchError(f"cannot fetch {what}: `{' '.join(cmd)}` failed: {' | '.join(tail)}")
    return proc.stdout


def _unpack_once(dest: Path, unpack) -> Path:
    """Run `unpack(tmp_dir)` unless `dest` exists, then rename the temp dir into place."""
    if dest.is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=dest.name + ".", dir=dest.parent))
    try:
        unpack(tmp)
        tmp.rename(dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return dest


def fetch_deb(name: str, cache_dir: Path) -> Package:
    """`apt-get download NAME` (unless a NAME_*.deb is cached) and `dpkg-deb -x` it."""
    cache_dir = Path(cache_dir).resolve()  # apt-get runs inside debs/: a relative path would break
    debs = cache_dir / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    found = sorted(debs.glob(f"{name}_*.deb"))
    if not found:
        _run(["apt-get", "download", name], debs, f"Debian package {name!r}")
        found = sorted(debs.glob(f"{name}_*.deb"))
        if not found:
            raise FetchError(f"cannot fetch Debian package {name!r}: apt-get download produced no .deb")
    deb = found[-1]
    version = _run(["dpkg-deb", "-f", str(deb), "Version"], debs, f"Debian package {name!r}").strip()
    dest = cache_dir / "unpacked" / f"{name}_{version.replace(':', '%3a')}"
    _unpack_once(dest, lambda tmp: _run(["dpkg-deb", "-x", str(deb), str(tmp)], debs, f"Debian package {name!r}"))
    return Package("deb", name, version, dest)


def fetch_pypi(name: str, version: str, cache_dir: Path) -> Package:
    """`pip download --no-deps NAME==VERSION` (unless cached) and unpack the wheel or sdist."""
    cache_dir = Path(cache_dir).resolve()
    wheels = cache_dir / "pypi"
    wheels.mkdir(parents=True, exist_ok=True)
    stem = name.replace("-", "_").lower()

    def cached() -> list[Path]:  # wheel "name-1.0-py3-none-any.whl" or sdist "name-1.0.tar.gz"
        return sorted(p for p in wheels.iterdir() if p.name.lower().replace("-", "_").startswith(f"{stem}_{version}_")
                      or p.name.lower().replace("-", "_") in (f"{stem}_{version}.tar.gz", f"{stem}_{version}.zip"))

    if not cached():
        _run([sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
              "-d", str(wheels), f"{name}=={version}"], wheels, f"PyPI package {name}=={version}")
        if not cached():
            raise FetchError(f"cannot fetch PyPI package {name}=={version}: pip downloaded no file")
    archive = cached()[0]

    def unpack(tmp: Path) -> None:
        if archive.suffix == ".whl" or archive.suffix == ".zip":
            with zipfile.ZipFile(archive) as z:
                z.extractall(tmp)
        else:
            with tarfile.open(archive) as t:
                t.extractall(tmp, filter="data")

    dest = _unpack_once(cache_dir / "unpacked" / f"pypi-{name}_{version}", unpack)
    return Package("pypi", name, version, dest)
