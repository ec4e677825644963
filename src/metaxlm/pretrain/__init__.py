"""Pretraining: one engine (engine.py), pluggable objectives (objectives/), packed α-sampled batches."""
