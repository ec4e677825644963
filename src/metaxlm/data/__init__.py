"""Data layer: readers, language sampling, Arrow preparation, statistics and the demo bundle."""
