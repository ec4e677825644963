"""Atomic writes: a crash mid-write never leaves a half-written file under the final name.

A write that fails because the filesystem is full becomes a `DiskFull` error (see `disk_full_guard`): one message
naming what was being written, the free space, what is intact and what to do, with the partial files removed.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from metaxlm.errors import DataError, DiskFull


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_path(path: str | Path):
    """Yield a temporary path beside `path`; on success fsync and rename it into place. A full disk is a DiskFull."""
    path = Path(path)
    tmp: str | None = None

    def remove_tmp() -> None:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)

    with disk_full_guard(path, cleanup=remove_tmp):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; published files get the usual mode
        yield Path(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())  # some filesystems (NFS, delayed allocation) report a full disk only here
        os.replace(tmp, path)


def atomic_write_text(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


@contextmanager
def atomic_dir(path: str | Path):
    """Yield a temporary directory beside `path`; on success replace `path` with it. A full disk is a DiskFull."""
    path = Path(path)
    tmp: Path | None = None

    def remove_tmp() -> None:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)

    with disk_full_guard(path, cleanup=remove_tmp):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes 0700
        yield tmp
        if path.exists():
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
            try:
                os.replace(tmp, path)
            except BaseException:
                os.replace(old, path)  # the previous version stays where readers look for it
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)


def append_line(path: str | Path, line: str, *, what: str = "") -> None:
    """Append one line to an append-only log (metrics.jsonl). An append that fails midway is cut back to where it
    started, so the log never ends in a partial line; a full disk is a DiskFull (`what` describes the log)."""
    path = Path(path)
    size = path.stat().st_size if path.exists() else 0

    def cut_back() -> None:
        if path.exists() and path.stat().st_size > size:
            os.truncate(path, size)

    with disk_full_guard(path, what=what, cleanup=cut_back), open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


def jsonl_lines(path: str | Path) -> list[str]:
    """The lines of a JSON-lines log written with append_line, but a last one left incomplete by a process killed
    mid-append (it would stop every reader). An unreadable line elsewhere was not written that way: a DataError."""
    # a complete log ends in "\n": last item ""
    lines = Path(path).read_text(encoding="utf-8", errors="replace").split("\n")
    for number, line in enumerate(lines, 1):
        try:
            json.loads(line)
        except ValueError:
            if number == len(lines) or number == len(lines) - 1 and not lines[-1]:
                return lines[: number - 1]  # the end, or an interrupted append (with or without its newline)
            raise DataError(path, number, "not a JSON line; only metaxlm writes this log: restore or delete it") \
                from None
    return lines  # every line parsed: the last one is complete but lacks its newline


# -- a full disk ----------------------------------------------------------------------------------------------------

# A full disk does not always arrive as OSError(ENOSPC): safetensors raises SafetensorError("... No space left on
# device (os error 28)"), and torch.save to a path raises RuntimeError("[enforce fail at inline_container.cc] ...
# unexpected pos") with no errno at all. So a failed write is a full disk when its exception chain has the errno,
# or its text says so, or (for I/O-kind errors that say nothing) the filesystem has next to no space left.
FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}
FULL_TEXT = re.compile(r"no space left on device|disk quota exceeded|os error (?:28|122)\b|errno (?:28|122)\b", re.I)
NEARLY_FULL_BYTES = 1 << 20  # at most 1% of the filesystem (a small tmpfs)
IO_ERROR_MODULES = ("safetensors", "pyarrow")  # their own error classes, raised for failed writes too


def _existing(path: str | Path) -> Path:
    """`path`, or its nearest ancestor that exists (what statvfs can be asked about)."""
    p = Path(os.path.abspath(path))
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def mount_point(path: str | Path) -> Path:
    p = _existing(path).resolve()
    while not os.path.ismount(p) and p != p.parent:
        p = p.parent
    return p


def free_bytes(path: str | Path) -> int:
    """Bytes an unprivileged user may still write on `path`'s filesystem."""
    st = os.statvfs(_existing(path))
    return st.f_bavail * st.f_frsize


def _nearly_full(path: str | Path) -> bool:
    st = os.statvfs(_existing(path))
    return free_bytes(path) < min(NEARLY_FULL_BYTES, st.f_blocks * st.f_frsize // 100 or 1)


def _chain(err: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    todo = [err]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo += [e.__cause__, e.__context__, *getattr(e, "exceptions", ())]


def is_disk_full(err: BaseException, path: str | Path) -> bool:
    """Whether `err`, raised while writing `path`, means the filesystem is full. Call it before removing the partial
    files: only then does the free space still show that the disk was full."""
    if isinstance(err, DiskFull):
        return True
    for e in _chain(err):
        if isinstance(e, OSError) and e.errno in FULL_ERRNOS or FULL_TEXT.search(str(e)):
            return True
    io_kind = isinstance(err, OSError | RuntimeError) or type(err).__module__.startswith(IO_ERROR_MODULES)
    try:
        return io_kind and _nearly_full(path)
    except OSError:
        return False


# A pretraining run's checkpoints: <run>/ckpt/step_N/, and the pointer <run>/ckpt/latest naming the last finished one,
# moved (atomically) only after a checkpoint is complete. Defined here, below the run layout (metaxlm.run.layout),
# because a DiskFull anywhere in a run names the checkpoint to resume from.
CHECKPOINTS_DIR = "ckpt"
LATEST_POINTER = "latest"


def latest_checkpoint(ckpt_root: Path) -> Path | None:
    """The checkpoint `ckpt_root/latest` names, if it is complete (the pointer is only moved to a finished one)."""
    pointer = Path(ckpt_root) / LATEST_POINTER
    if not pointer.exists():
        return None
    path = Path(ckpt_root) / pointer.read_text().strip()
    return path if (path / "trainer_state.json").exists() else None


def checkpoint_near(path: str | Path) -> Path | None:
    """The latest checkpoint of the pretraining run that `path` belongs to, or None. A run's files sit at most three
    levels below its directory (ckpt/.tmp-step_N/optimizer.pt), and only a run directory holds ckpt/latest: so a
    DiskFull raised by a generic write (the final model, summary.json) can still name the checkpoint to resume."""
    for folder in list(Path(os.path.abspath(path)).parents)[:3]:
        if (folder / CHECKPOINTS_DIR / LATEST_POINTER).is_file():
            return latest_checkpoint(folder / CHECKPOINTS_DIR)
    return None


def recovery_near(path: str | Path) -> tuple[str, str]:
    """(what is intact, how to continue) for a DiskFull while writing `path`: within a pretraining run, its last good
    checkpoint and --resume; elsewhere ("", ""): DiskFull's defaults (nothing half-written kept, run it again)."""
    ckpt = checkpoint_near(path)
    if ckpt is None:
        return "", ""
    return f"The last good checkpoint {ckpt} is intact.", "then rerun with --resume"


@contextmanager
def disk_full_guard(target: str | Path, *, what: str = "", part: str | None = None,
                    cleanup: Callable[[], None] | None = None, kept: str = "", rerun: str = ""):
    """Run a write of `target`; on any error run `cleanup` (remove the partial files); a full disk becomes DiskFull.

    `what` (e.g. "checkpoint") describes `target` for the user; a guard with `what` around inner ones re-describes
    their DiskFull (`part`: which piece of `target` failed; default: the inner target's name). `kept`/`rerun`: what
    is intact and how to continue (default: `recovery_near(target)`). The free space is measured before `cleanup`
    (proof of a full disk when the error says nothing) and again after it."""
    try:
        yield
    except BaseException as err:
        inner = err if isinstance(err, DiskFull) else None
        full = inner is not None or (isinstance(err, Exception) and is_disk_full(err, target))
        free_at_failure = inner.free_at_failure if inner else _free_or_zero(target) if full else 0
        if cleanup is not None:
            try:
                cleanup()
            except OSError:
                pass  # the original error is the one to report
        if not full:
            raise
        fields = inner.fields() if inner else {"mount": str(mount_point(target)), "part": part}
        name = inner.target if inner else str(target)
        if what:
            fields["part"] = part or fields.get("part") or (Path(name).name if Path(name) != Path(target) else None)
            fields["what"], name = what, str(target)
        if kept or rerun:
            fields["kept"], fields["rerun"] = kept or fields.get("kept", ""), rerun or fields.get("rerun", "")
        elif not inner:
            fields["kept"], fields["rerun"] = recovery_near(target)
        fields["free_at_failure"], fields["free_after"] = free_at_failure, _free_or_zero(target)
        raise DiskFull(name, **fields) from (inner.__cause__ if inner else err)


def _free_or_zero(path: str | Path) -> int:
    try:
        return free_bytes(path)
    except OSError:
        return 0


def json_safe(obj: Any) -> Any:
    """JSON has no NaN or infinity: a missing score (e.g. a language without training data) becomes null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_safe(v) for v in obj]
    return obj
