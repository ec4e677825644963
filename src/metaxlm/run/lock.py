"""One writer at a time: a run directory (and a report folder, and each fine-tuning run) is held by one command.

Two `metaxlm run` on one output_dir once trained the vocabulary and prepared the data into the same folders: one
crashed with a traceback, the other exited 0 with duplicated metrics. Now every command that writes a run
directory holds its lock, `<dir>/metaxlm.lock`, while it runs, and a second one refuses at once, in one line that
names the holder: `runs/demo is in use by metaxlm run (pid 4242 on host-a, since 2026-11-30T10:00:00+00:00) ...`.

- **Nothing stays stuck.** The lock is `fcntl.flock` on the lock file: the kernel releases it when the holder's
  process ends in any way, SIGKILL and a lost machine's reboot included, so a killed run never needs its lock
  removed by hand. The file only says who holds it (pid, host, since, what), for the message; a record left
  behind by a killed holder vouches for nothing. Processes forked by the holder (data-loader and tokenizer workers)
  close their copy at the fork: a worker outliving its killed run does not keep the run's directory locked.
- **One run, several processes.** Under torchrun / accelerate launch only rank 0 takes the lock, for the whole
  launch (metaxlm.run.processes: the other ranks write nothing rank 0 does not coordinate); the other ranks are
  never refused. A second launch on the same directory is refused on its rank 0, and the launcher stops the rest.
- **Evaluations may share a directory.** An evaluation can be split over invocations side by side on one run
  (`metaxlm run CONFIG 'stages=[evaluate]' 'evaluate.seeds=[1]'` beside the same with `[0]`; or with other
  `data.languages`, as docs/results/translation/README.md did): such invocations, whose only stage is evaluate,
  share the lock (`fcntl.LOCK_SH`), and anything else that writes the directory takes it alone (`LOCK_EX`), so an
  evaluation never reads a model that is being pretrained nor a vocabulary being retrained. What side-by-side
  evaluations both write is safe: each fine-tuning run (one language, one seed) is held by one of them
  (`<run>.lock` beside its record), and parts and results.json are written atomically (the last one written
  stands; the rerun with every seed reuses every finished run and writes the whole).
- **Within one process** holding a lock again is a no-op (a command calling a stage that locks too).

A file system without flock (rare: some network mounts) runs unprotected, with a warning saying so.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from metaxlm.errors import MetaXLMError
from metaxlm.run.layout import RunDir
from metaxlm.run.processes import is_main

SHARED_STAGES = frozenset({"evaluate"})  # invocations running only these may share a run directory


class Busy(MetaXLMError):
    """The directory (or fine-tuning run) is held by another command; the message names it and says what to do."""


@dataclass
class _Held:
    fd: int
    shared: bool
    depth: int = 1


_HELD: dict[str, _Held] = {}  # resolved lock file -> this process's hold


def _forget_in_child() -> None:
    """After a fork: the child is not the holder (its copy of the descriptor would keep the lock past the
    holder's death)."""
    for held in _HELD.values():
        try:
            os.close(held.fd)
        except OSError:
            pass
    _HELD.clear()


os.register_at_fork(after_in_child=_forget_in_child)


def shared_stages(stages) -> bool:
    """Whether an invocation running `stages` may share its run directory (evaluations split side by side)."""
    return bool(stages) and set(stages) <= SHARED_STAGES


def _record(what: str, shared: bool) -> dict:
    return {"pid": os.getpid(), "host": socket.gethostname(), "what": what, "shared": shared,
            "since": datetime.now(UTC).isoformat(timespec="seconds")}


def _alive(record: dict) -> bool:
    """False for a holder known dead (its pid gone on this host); a holder on another host cannot be checked."""
    if record.get("host") != socket.gethostname():
        return True
    try:
        os.kill(int(record["pid"]), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError, KeyError, TypeError):
        return True
    return True


def holders(lock_file: str | Path) -> list[dict]:
    """Who holds `lock_file` as its records say: the exclusive holder, or the shared holders not yet released
    (records of holders known dead left out)."""
    try:
        lines = Path(lock_file).read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    found: dict[str, dict] = {}
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        if "released" in record:
            found.pop(str(record["released"]), None)
        elif "pid" in record:
            found[f"{record.get('host')}/{record.get('pid')}/{record.get('since')}"] = record
    return [r for r in found.values() if _alive(r)]


def current_holders(lock_file: str | Path) -> list[dict] | None:
    """Who holds `lock_file` now, asked without writing (`metaxlm status`): None when no process holds it, else the
    holders' records ([] for a holder that left none). Asked with a shared lock taken and dropped at once: it fails
    only against an exclusive holder; shared holders (evaluations) are told by their records."""
    try:
        fd = os.open(lock_file, os.O_RDONLY)
    except OSError:
        return None  # never held
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return holders(lock_file)
    except OSError:
        return None  # a file system without flock: nothing can be told
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return [r for r in holders(lock_file) if r.get("shared")] or None
    finally:
        os.close(fd)


def _holder_text(found: list[dict]) -> str:
    if not found:
        return "another process (none on record: one that has just started, or a process a holder started)"
    shown = [f"{r.get('what', '?')} (pid {r.get('pid')} on {r.get('host')}, since {r.get('since')})" for r in found]
    return shown[0] if len(shown) == 1 else f"{len(shown)} processes: {'; '.join(shown)}"


def _busy_message(subject: str, what: str, shared: bool, found: list[dict], hint: str) -> str:
    why = ("one command writes it at a time (evaluations alone may share it: invocations whose only stage is "
           "evaluate)") if not shared else "an evaluation shares it only with other evaluations"
    todo = hint or "wait for it to finish or stop it, or give this one another output directory"
    return f"{subject} is in use by {_holder_text(found)}; {what} refused: {why}; {todo}"


@contextmanager
def held(lock_file: str | Path, what: str, *, shared: bool = False, hint: str = "", subject: str | None = None):
    """Hold `lock_file` (flock: exclusive, or `shared` with other shared holders) while the block runs; Busy at
    once when another process holds it in a conflicting way. `what` names this command for the other's message
    (e.g. "metaxlm run"); `hint`: what to do instead, for this one's; `subject`: what is held, as the message names
    it (default: the lock file's directory). A no-op on a non-zero rank of a launched run, and when this process
    holds it already."""
    if not is_main():
        yield
        return
    path = Path(lock_file)
    path.parent.mkdir(parents=True, exist_ok=True)
    key = str(path.resolve())
    if key in _HELD:
        _HELD[key].depth += 1
        try:
            yield
        finally:
            _HELD[key].depth -= 1
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise Busy(_busy_message(subject or str(path.parent), what, shared, holders(path), hint)) from None
    except OSError as err:
        os.close(fd)
        if err.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            raise
        print(f"metaxlm: warning: cannot lock {path} ({os.strerror(err.errno)}): nothing stops a second command "
              f"from writing {path.parent} at the same time", file=sys.stderr, flush=True)
        yield
        return
    me = _record(what, shared)
    try:
        if not shared:  # the records of earlier holders, all gone now
            os.ftruncate(fd, 0)
        os.write(fd, (json.dumps(me) + "\n").encode())
    except OSError:
        pass  # a full disk: the lock holds all the same, the message will lack the record
    _HELD[key] = _Held(fd, shared)
    try:
        yield
    finally:
        _HELD.pop(key, None)
        try:
            if shared:
                os.write(fd, (json.dumps({"released": f"{me['host']}/{me['pid']}/{me['since']}"}) + "\n").encode())
            else:
                os.ftruncate(fd, 0)
        except OSError:
            pass
        os.close(fd)  # releases the lock


@contextmanager
def run_dir_held(output_dir: str | Path, what: str, stages=None, *, hint: str = ""):
    """Hold a run directory for a command running `stages` (None: a command that writes more than evaluations):
    shared when its only stage is evaluate, else alone."""
    with held(RunDir(Path(output_dir)).lock, what, shared=stages is not None and shared_stages(stages), hint=hint):
        yield
