"""What the fuzz tests (test_fuzz_*.py) share: how many inputs each tries, and the hang guard.

Hypothesis's own deadline measures wall time, which a loaded 2-core machine stretches tenfold and more; the guard
here measures the CPU time an input takes instead (ITIMER_PROF), so it stops a hang without failing slow machines.
"""

from __future__ import annotations

import functools
import os
import signal
from contextlib import contextmanager

from hypothesis import HealthCheck, given, settings

# Inputs per fuzz test; METAXLM_FUZZ_EXAMPLES=2000 runs a deeper search.
FUZZ_EXAMPLES = int(os.environ.get("METAXLM_FUZZ_EXAMPLES", "150"))
# bench/fuzz_inputs.py sets this to a file: every input tried appends its test's name there (one line per input)
TALLY_FILE = os.environ.get("METAXLM_FUZZ_TALLY")


def tally(test_name: str, inputs: int = 1) -> None:
    """Count `inputs` tried by `test_name` (a no-op unless METAXLM_FUZZ_TALLY names a file)."""
    if TALLY_FILE:
        with open(TALLY_FILE, "a", encoding="utf-8") as out:
            out.write(f"{test_name}\n" * inputs)
# A hang uses CPU without end; the slowest legitimate inputs (2000-deep YAML) take under 1 s alone, but once took
# over 5 s in a worker beside the rest of the suite on a loaded 2-core machine (its replay then took far less)
CPU_SECONDS_PER_INPUT = 30.0


@contextmanager
def cpu_time_limit(seconds: float):
    """Raise TimeoutError in the running code once it has used `seconds` of CPU time."""
    def expire(signum, frame):
        raise TimeoutError(f"input used more than {seconds} s of CPU time: a hang")

    previous = signal.signal(signal.SIGPROF, expire)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def fuzz(*strategies):
    """@given(*strategies) with FUZZ_EXAMPLES inputs, each run under the CPU-time hang guard."""
    def decorate(test):
        @functools.wraps(test)
        def guarded(*args, **kwargs):
            tally(test.__name__)  # every call is one input (shrinking's replays included)
            with cpu_time_limit(CPU_SECONDS_PER_INPUT):
                return test(*args, **kwargs)

        return settings(max_examples=FUZZ_EXAMPLES, deadline=None,
                        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])(
            given(*strategies)(guarded))
    return decorate
