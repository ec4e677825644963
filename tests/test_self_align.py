"""Alignment self-training (pretrain/objectives/self_align.py, after awesome-align's SO objective): the two
softmaxes and their agreed links, the loss's gradient raising exactly the links' probabilities, the degenerate
rows, and a run in the engine that resumes exactly."""

from __future__ import annotations

import pytest
import torch
from pretrain_helpers import check_resume_after_sigkill, make_config, metrics

from metaxlm.config import load_config
from metaxlm.pretrain.objectives.self_align import link_probabilities, self_training_loss


def test_the_softmaxes_and_links_leave_out_what_is_not_alignable():
    torch.manual_seed(0)
    src, tgt = torch.randn(2, 4, 8), torch.randn(2, 3, 8)
    src_ok = torch.tensor([[True, True, True, False], [False, False, False, False]])  # row 2: nothing alignable
    tgt_ok = torch.tensor([[True, False, True], [True, True, True]])
    p_xy, p_yx, mask = link_probabilities(src, tgt, src_ok, tgt_ok)
    assert not torch.isnan(p_xy).any() and not torch.isnan(p_yx).any()
    assert (torch.allclose(p_xy[0, :3].sum(1), torch.ones(3))
            and torch.allclose(p_yx[0][:, [0, 2]].sum(0), torch.ones(2)))
    assert (p_xy[~mask] == 0).all() and (p_yx[~mask] == 0).all() and p_xy[1].sum() == 0
    links = (p_xy > 1e-3) & (p_yx > 1e-3) & mask
    assert self_training_loss(p_xy, p_yx, torch.zeros_like(links), src_ok, tgt_ok) == 0  # no link, no loss
    assert self_training_loss(p_xy, p_yx, links, src_ok, tgt_ok) > 0
    certain = torch.ones_like(p_xy)
    assert self_training_loss(certain, certain, links, src_ok, tgt_ok) == 0  # every link certain both ways


def test_a_step_down_the_gradient_raises_the_linked_probabilities():
    """Both directions' probability of the self-labelled links rise (as sums: single links are coupled through the
    softmaxes), and the loss falls."""
    torch.manual_seed(1)
    src = torch.randn(1, 5, 16, requires_grad=True)
    tgt = torch.randn(1, 6, 16, requires_grad=True)
    ok_s, ok_t = torch.ones(1, 5, dtype=torch.bool), torch.ones(1, 6, dtype=torch.bool)
    p_xy, p_yx, mask = link_probabilities(src, tgt, ok_s, ok_t)
    links = ((p_xy > 0.2) & (p_yx > 0.2)).detach()
    assert links.any()
    loss = self_training_loss(p_xy, p_yx, links, ok_s, ok_t)
    loss.backward()
    with torch.no_grad():
        after_xy, after_yx, _ = link_probabilities(src - 0.5 * src.grad, tgt - 0.5 * tgt.grad, ok_s, ok_t)
    before_xy, before_yx = p_xy.detach()[links], p_yx.detach()[links]
    assert after_xy[links].sum() > before_xy.sum() and after_yx[links].sum() > before_yx.sum()
    assert self_training_loss(after_xy, after_yx, links, ok_s, ok_t) < loss


@pytest.fixture(scope="module")
def start_encoder(run_template, tmp_path_factory):
    """A pretrained tiny start (a few MLM steps), so the agreed links are not those of random weights."""
    from metaxlm.pretrain.variant import run_pretrain

    root = tmp_path_factory.mktemp("self_align_start")
    cfg = load_config(make_config(run_template, root, steps=4, save_every=4))
    run_pretrain(cfg, "xlm", progress=False)
    return root / "run" / "pretrain" / "xlm" / "final"


def test_in_the_engine_with_moco_it_logs_links_and_resumes_exactly(parallel_template, start_encoder, tmp_path):
    objectives = "train.objectives={self_align: {weight: 1.0, layer: 1}, moco: {weight: 1.0, queue_size: 16}}"
    ckpt = check_resume_after_sigkill(parallel_template, tmp_path, objectives, "train.precision=fp32",
                                      f"variants={{xlm: {{start_from: {start_encoder}}}}}", steps=8, save_every=2,
                                      kill_at=2, eval_every=4, files=("model.safetensors",))
    rows = metrics(ckpt.parent)
    losses = [r["loss/self_align"] for r in rows if "loss/self_align" in r]
    assert len(losses) == 8 and all(v >= 0 for v in losses)  # the links' missing probability: never below 0
    assert any(r.get("eval/self_align/links_per_pair", 0) > 0 for r in rows)
