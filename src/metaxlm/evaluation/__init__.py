"""Evaluation: the recipe (fine-tuning scenarios + feature-based probes per model) and its results. The
metrics themselves are `metaxlm.metrics`, shared with fine-tuning and the probes."""
