"""`ModelArch.expand_vocabulary`, the counterpart of `select_vocabulary`."""

import pytest
import torch
from pretrain_helpers import TINY


@pytest.mark.parametrize("tied", [True, False])
def test_expanding_a_selected_vocabulary_gives_the_model_back(tokenizer_dir, tied):
    """`expand_vocabulary` undoes `select_vocabulary` (input embeddings, output layer tied or not, output bias);
    changed kept rows land at their ids."""
    import copy

    from metaxlm.config import ModelConfig
    from metaxlm.models import arch_of, build_mlm
    from metaxlm.vocab import load_tokenizer

    tok = load_tokenizer(tokenizer_dir)
    model = build_mlm(ModelConfig(**TINY), tok, seed=1)
    if not tied:
        model.config.tie_word_embeddings = False
        model.cls.predictions.decoder.weight = torch.nn.Parameter(torch.randn(len(tok), TINY["hidden"]))
    with torch.no_grad():
        model.cls.predictions.bias.normal_()
    keep = [tok.pad_token_id, tok.cls_token_id, tok.sep_token_id, 40, 7, 33, 12]
    small = copy.deepcopy(model)
    arch = arch_of(small)
    arch.select_vocabulary(small, keep)
    assert (small.get_output_embeddings().weight is small.get_input_embeddings().weight) == tied
    assert small.get_output_embeddings().weight.shape[0] == len(keep)
    with torch.no_grad():
        small.get_input_embeddings().weight[3] = 0.5  # new id 3 = old id 40: a trained row
    arch.expand_vocabulary(small, model, keep)
    assert small.config.vocab_size == len(tok) and small.get_input_embeddings().padding_idx == tok.pad_token_id
    assert (small.get_output_embeddings().weight is small.get_input_embeddings().weight) == tied
    with torch.no_grad():  # (the expanded model holds copies of the start's rows)
        model.get_input_embeddings().weight[40] = 0.5
    got, want = small.state_dict(), model.state_dict()
    assert got.keys() == want.keys()
    for key in want:
        assert torch.equal(got[key], want[key]), key
