"""Compute on this machine: the CPU fast path for training, and the precision that fits the CPU."""
