"""Each registered objective and model architecture declares its options (`Options`); a config's options are
checked by them when the config is loaded, and the generated config reference lists them, a plugin's too."""

import pytest

from metaxlm.config import load_config
from metaxlm.config_reference import reference_markdown
from metaxlm.errors import ConfigError
from metaxlm.registry import OBJECTIVES, Registry

DEMO = "demo"  # the packaged config, found by name


def test_a_misspelt_objective_option_fails_when_the_config_is_loaded_naming_it_and_the_valid_ones():
    with pytest.raises(ConfigError) as err:
        load_config(_demo(), ["train.objectives.tlm={ordr: shuffled}"])
    message = str(err.value)
    assert "train.objectives.tlm.ordr: unknown key (did you mean order?)" in message
    assert "tlm's options: lr_scale, mask_prob, order, weight" in message
    assert load_config(_demo(), ["train.objectives.tlm={order: shuffled}"]).train.objectives["tlm"] == {
        "order": "shuffled"}


def test_architecture_options_are_checked_at_load_and_unknown_objectives_named():
    with pytest.raises(ConfigError, match="model.arch 'bert' has no options"):
        load_config(_demo(), ["model.options={layers: 3}"])
    with pytest.raises(ConfigError, match="model.options.cross_attention: unknown key"):
        load_config(_demo(), ["model.arch=veco", "model.options={cross_attention: [1]}"])
    with pytest.raises(ConfigError, match="unknown objective 'tlmm'"):
        load_config(_demo(), ["train.objectives={tlmm: 1.0}"])


def test_a_plugin_objectives_options_are_in_the_config_reference(tmp_path):
    plugin = tmp_path / "options_plugin.py"
    plugin.write_text(
        "from metaxlm.pretrain.objectives import register\n"
        "from metaxlm.pretrain.objectives.mlm import MaskedLM, MaskingOptions\n\n"
        "class SpanOptions(MaskingOptions):\n"
        "    span_length: int = 3  # tokens per masked span\n\n"
        "@register('span_mlm_for_the_reference')\n"
        "class SpanMLM(MaskedLM):\n"
        "    Options = SpanOptions\n", encoding="utf-8")
    page = reference_markdown(plugins=[str(plugin)])
    assert "`train.objectives.span_mlm_for_the_reference.span_length`" in page
    assert "tokens per masked span" in page
    assert "`train.objectives.tlm.order`" in page and "`model.options.cross_attention_layers`" in page
    with pytest.raises(ConfigError, match="span_mlm_for_the_reference's options: .*span_length"):
        load_config(_demo(), [f"plugins=[{plugin}]", "train.objectives={span_mlm_for_the_reference: {span_len: 2}}"])


def test_a_registry_refuses_an_entry_that_is_not_of_its_base():
    registry = Registry("thing")
    registry.require(int)
    with pytest.raises(TypeError, match="not a subclass of int"):
        registry.register("text")(str)
    with pytest.raises(TypeError, match="not a subclass of Objective"):
        OBJECTIVES.register("not_an_objective")(type("Plain", (), {}))


def _demo():
    from metaxlm.packaged import find_config

    return find_config(DEMO)
