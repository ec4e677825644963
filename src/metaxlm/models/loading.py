"""Loading HF models quietly: transformers reports expected differences (a dropped MLM head, a new task head)
and shows a progress bar; both are noise where metaxlm checks the weights itself."""

from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def quiet_transformers():
    from transformers.utils import logging as hf_logging

    verbosity, bar = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bar:
            hf_logging.enable_progress_bar()
