"""Tests of the dataset-building tools (in `make test`: pyproject testpaths)."""
