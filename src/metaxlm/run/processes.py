"""Several processes of one run (torchrun / accelerate launch): who prints, how long to wait for a peer, how to stop.

- **Only rank 0 talks.** `quiet_other_ranks()` (called by the CLI before any work) sends a non-zero rank's stdout to
  /dev/null and turns off its progress bars (tqdm, transformers, datasets, huggingface_hub) and its warnings; its
  stderr stays open, so an error on any rank is still printed, labelled with the rank (`label()`).
- **No hang on a dead or frozen peer.** Collectives time out after `METAXLM_COLLECTIVE_TIMEOUT` seconds (default
  600; `process_group_kwargs()` is passed to the process-group set-up). A peer that dies closes its connections, so
  the others fail at once; one that hangs (or is stopped) is noticed when the timeout expires.
- **One clear message.** `stop_on_peer_failure(ckpt_dir)` wraps a multi-process pretraining run: the SIGTERM that
  torchrun sends to the surviving processes when one dies, and a collective's failure or timeout, become one
  `RunStopped` error — e.g. `rank 0 stopped: process rank 1 died; last good checkpoint .../ckpt/step_00000040;
  rerun with --resume` — printed by the CLI without a traceback (exit code 2).

Everything here reads the launcher's environment (RANK, WORLD_SIZE, LOCAL_RANK); one process without a launcher is
rank 0 of 1 and nothing changes for it.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
import warnings
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

from metaxlm.errors import ConfigError, MetaXLMError

TIMEOUT_ENV = "METAXLM_COLLECTIVE_TIMEOUT"
DEFAULT_TIMEOUT = 600.0  # seconds (torch's own default for gloo is 1,800; NCCL's 600)


class RunStopped(MetaXLMError):
    """A multi-process run stopped because another process died, hung or the launcher stopped it. The message names
    the last good checkpoint and says how to continue."""


class Terminated(BaseException):  # noqa: N818 -- like KeyboardInterrupt: not caught by `except Exception`
    """SIGTERM arrived (torchrun sends it to the surviving processes when one of them dies)."""


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        raise ConfigError(f"environment variable {name}={value!r}: expected a whole number (set by the launcher: "
                          f"torchrun / accelerate launch)") from None
    if number < 0:
        raise ConfigError(f"environment variable {name}={value!r}: expected a number >= 0")
    return number


def rank() -> int:
    """This process's global rank (RANK; 0 without a launcher)."""
    return _env_int("RANK", 0)


def local_rank() -> int:
    return _env_int("LOCAL_RANK", 0)


def world_size() -> int:
    """The number of processes of the run (WORLD_SIZE; 1 without a launcher)."""
    return max(1, _env_int("WORLD_SIZE", 1))


def is_main() -> bool:
    return rank() == 0


def collective_timeout() -> float:
    """Seconds a collective (all-reduce, barrier, broadcast) waits for the other processes: $METAXLM_COLLECTIVE_TIMEOUT,
    default 600. A bad value is a ConfigError naming the variable."""
    value = os.environ.get(TIMEOUT_ENV, "").strip()
    if not value:
        return DEFAULT_TIMEOUT
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if not seconds > 0 or seconds == float("inf"):
        raise ConfigError(f"environment variable {TIMEOUT_ENV}={value!r}: expected a number of seconds > 0 (how long "
                          f"a process waits for the others before stopping; default {DEFAULT_TIMEOUT:.0f})")
    return seconds


def process_group_kwargs() -> dict:
    """Keyword arguments for the process-group set-up (torch.distributed.init_process_group, through accelerate's
    PartialState): the collective timeout when several processes run, nothing otherwise."""
    if world_size() == 1:
        return {}
    return {"timeout": timedelta(seconds=collective_timeout())}


def label(message: str) -> str:
    """`message` prefixed with this process's rank when several processes run (and it does not say it already)."""
    try:
        if world_size() == 1 or message.startswith(f"rank {rank()} "):
            return message
        return f"rank {rank()}: {message}"
    except ConfigError:  # a bad RANK / WORLD_SIZE: the message about it is enough
        return message


_quieted = False


def quiet_other_ranks() -> None:
    """On a non-zero rank: stdout to /dev/null; no progress bars (tqdm and the HF libraries' own switches); no
    warnings or info logs. Errors still reach stderr. Rank 0, and a single process, are left as they are. Idempotent."""
    global _quieted
    if is_main() or _quieted:
        return
    _quieted = True
    os.environ.update({"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1",
                       "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
                       "TRANSFORMERS_VERBOSITY": "error", "DATASETS_VERBOSITY": "error",
                       "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1", "TOKENIZERS_PARALLELISM": "false"})
    # the libraries read these at import; when already imported, their own switches
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    if "datasets" in sys.modules:
        import datasets

        datasets.logging.set_verbosity_error()
        datasets.disable_progress_bars()
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)  # WARNING and below; ERROR and CRITICAL still show
    sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # also what C extensions and child processes print
    os.close(devnull)
    sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 -- for the life of the process


def _peer() -> str:
    return f"process rank {1 - rank()}" if world_size() == 2 else "another process of the run"


def collective_failure(err: BaseException) -> str | None:
    """What a collective's error means, as the message's cause: a peer that died, one that did not answer in time;
    None when `err` is not a collective's failure."""
    import torch

    text = str(err)
    dist_error = isinstance(err, getattr(torch.distributed, "DistError", ()))
    if not (isinstance(err, RuntimeError) or dist_error):
        return None
    lowered = text.lower()
    if "timed out" in lowered or "timeout" in lowered:
        return (f"no reply from a peer within {collective_timeout():.0f} s (a process hangs or was stopped; "
                f"{TIMEOUT_ENV} sets the wait)")
    if any(s in lowered for s in ("connection closed", "connection reset", "broken pipe", "connection refused",
                                  "socket closed", "peer")):
        return f"{_peer()} died"
    if dist_error or "gloo" in lowered or "nccl" in lowered or "c10d" in lowered:
        first = text.strip().splitlines()[0] if text.strip() else type(err).__name__
        return f"a collective operation failed ({first[:300]})"
    return None


def stopped_message(cause: str, ckpt_dir: str | Path | None) -> str:
    from metaxlm.io import latest_checkpoint

    good = latest_checkpoint(Path(ckpt_dir)) if ckpt_dir is not None else None
    if good is None:
        return f"rank {rank()} stopped: {cause}; no checkpoint written yet; rerun the same command (without --resume)"
    return f"rank {rank()} stopped: {cause}; last good checkpoint {good}; rerun with --resume"


def _raise_terminated(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process at once
    raise Terminated


@contextmanager
def stop_on_peer_failure(ckpt_dir: str | Path | None):
    """Around a multi-process run writing checkpoints to `ckpt_dir`: SIGTERM, and a collective's failure or timeout,
    end it with one RunStopped (naming the last good checkpoint) instead of a hang, a silent death or a traceback.
    A single process runs the body unchanged."""
    if world_size() == 1:
        yield
        return

    global _together
    try:
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    except ValueError:  # not the main thread: signals cannot be caught here
        previous = None
    _together += 1
    try:
        yield
    except Terminated:
        _hold_sigterm()
        cause = ("the launcher stopped it (SIGTERM: torchrun sends it when another process of the run dies or the job "
                 "is cancelled)")
    except Exception as err:
        cause = collective_failure(err)
        if cause is None:
            raise
        _hold_sigterm()
    else:
        cause = None
    finally:
        _together -= 1
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    if cause is not None:
        raise RunStopped(stopped_message(cause, ckpt_dir)) from None


def _hold_sigterm() -> None:
    """The run is stopping: from here until the process exits (`exit_stopped`), SIGTERM waits. torchrun sends it to
    the survivors when a process dies, often just as this one found out by itself; arriving between here and the
    printed message it would end the process silently or turn exit code 2 into a signal."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})


def exit_stopped(message: str) -> None:
    """Print a stopped run's one line and end the process at once with exit code 2: the process group is broken, so
    no slow or hanging teardown. SIGTERM is held first, so the launcher's cannot cut the line."""
    _hold_sigterm()
    print(f"metaxlm: error: {label(message)}", file=sys.stderr, flush=True)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(2)


_together = 0  # depth of stop_on_peer_failure sections: code every process runs (multi-process pretraining)


def together() -> bool:
    """True when several processes run and this code runs on every one of them (inside `stop_on_peer_failure`, i.e.
    multi-process pretraining), so a barrier can be met; False for one process, or for rank 0's own stages."""
    return world_size() > 1 and _together > 0


def rank0_first(make, what: str):
    """`make()` — a step that writes shared files (an import, a conversion) and is a no-op once they exist — on rank 0
    first and then on the others, once rank 0 is done, when every process runs it (`together()`); else just `make()`."""
    if not together():
        return make()
    result = make() if is_main() else None
    wait_for_main(what)
    return result if is_main() else make()


@contextmanager
def sigterm_raises():
    """While the block runs, SIGTERM (`kill`, a scheduler's time limit or cancel, `docker stop`) raises Terminated
    in the main thread, so a command ends like Ctrl-C: its run records the time of the stage it was in, and it exits
    with a message instead of dying where it stands. A second SIGTERM ends the process at once. Multi-process
    pretraining installs its own handler inside (stop_on_peer_failure) and puts this one back after."""

    try:
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    except ValueError:  # not the main thread (main() called from a thread): signals cannot be caught here
        previous = None
    try:
        yield
    finally:
        if previous is not None and signal.getsignal(signal.SIGTERM) is _raise_terminated:
            signal.signal(signal.SIGTERM, previous)


def init_process_group() -> None:
    """Set up the process group now (accelerate's PartialState, with the collective timeout), for collectives
    before training (`wait_for_main`). No-op for a single process or when already set up."""
    import torch

    if world_size() == 1 or (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return
    from accelerate import PartialState

    PartialState(cpu=not torch.cuda.is_available(), **process_group_kwargs())


def wait_for_main(what: str, *, poll: float = 0.2) -> None:
    """Every process calls it: the non-zero ranks wait (as long as it takes) until rank 0 gets here, e.g. after the
    stages only rank 0 runs. Rank 0's death ends the wait at once (its connections close); SIGTERM is handled
    between polls."""
    if world_size() == 1:
        return
    import torch.distributed as dist

    init_process_group()
    global _long_group
    if _long_group is None:  # its own group: rank 0's stages may take far longer than the collective timeout
        _long_group = dist.new_group(backend="gloo", timeout=timedelta(days=30))
    try:
        with stop_on_peer_failure(None):
            work = dist.barrier(group=_long_group, async_op=True)
            while not work.is_completed():
                time.sleep(poll)
            work.wait()
    except RunStopped as stop:
        cause = str(stop).removeprefix(f"rank {rank()} stopped: ").split("; no checkpoint written yet")[0]
        raise RunStopped(f"rank {rank()} stopped while waiting for rank 0 ({what}): {cause}") from None


_long_group = None
