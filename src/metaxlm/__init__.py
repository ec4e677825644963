"""metaxlm: cross-lingual language-model meta-pretraining and evaluation."""
__version__ = "0.1.0"
