"""Evaluation: metrics, the evaluation recipe (fine-tuning scenarios + feature-based probes) and results."""
