"""Helpers for loading HF models, shared by the feature probes and fine-tuning."""

from __future__ import annotations

from contextlib import contextmanager

__all__ = ["quiet_transformers"]


@contextmanager
def quiet_transformers():
    """Silence transformers' load report and progress bar while loading. A pretraining checkpoint has an MLM
    head and no task head: the report of unexpected/missing weights is then expected, and callers check the
    weights that matter themselves."""
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
