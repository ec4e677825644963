"""Data layer: readers, language sampling, Arrow preparation and statistics (the tools that build the
demo bundle and the large corpora are in tools/, outside the package)."""
