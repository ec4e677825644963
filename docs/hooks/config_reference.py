"""MkDocs hook: the config reference page (config-reference.md), generated at every build by
metaxlm.config_reference (the text `metaxlm configs reference` prints)."""

from __future__ import annotations

from mkdocs.structure.files import File, Files

from metaxlm.config_reference import reference_markdown

PAGE = "config-reference.md"


def on_files(files: Files, config) -> Files:
    files.append(File.generated(config, PAGE, content=reference_markdown()))
    return files
