"""Entropic optimal transport between the two token sets of each sentence pair: XLM-Align's transport plan.

XLM-Align (Chi et al. 2021, Sect. 3.2), checked against the authors' released code (the `xlm_align` fairseq
task, `--sinkhorn_iter 2`): the plan P of entropic OT with uniform marginals, cost = −similarity and
regularisation ε, solved by a FIXED small number of Sinkhorn iterations (each: normalise columns, then rows),
not to convergence. The authors' code normalises the raw dot products (kernel = similarity clipped at 1e-6);
here the kernel is exp(similarity / ε) of cosine similarities, the entropic OT the paper describes, which the
tests compare with POT's `ot.sinkhorn`.

Where metaxlm departs: a matrix with a single real row or column has the exact plan a ⊗ b (uniform) after any
iteration, so it is returned exactly; computed, its cells would differ only by rounding, and that noise (which
changes with the other pairs of the padded batch) would pick the link.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

KERNELS = ("paper", "cosine")


def kernel_similarity(src: torch.Tensor, tgt: torch.Tensor, kernel: str, epsilon: float = 1e-6) -> torch.Tensor:
    """(batch, m, n) similarity s whose s / μ is the log OT kernel, from (batch, m, d) and (batch, n, d) states:
    "paper": f_sim = log max(ε, h_i·h_j) (XLM-Align Eq. 1; K = max(ε, h·h)^(1/μ), Eq. 5) on the raw states;
    "cosine": cos(h_i, h_j) (K = exp(cos / μ)), metaxlm's evaluation aligner."""
    src, tgt = src.float(), tgt.float()
    if kernel == "cosine":
        return torch.bmm(F.normalize(src, dim=-1), F.normalize(tgt, dim=-1).transpose(1, 2))
    if kernel == "paper":
        return torch.bmm(src, tgt.transpose(1, 2)).clamp(min=epsilon).log()
    raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")


def as_batch(sim: torch.Tensor, mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """(batch, m, n) similarities, their boolean mask (all real when None) and whether the input was one matrix."""
    single = sim.dim() == 2
    if single:
        sim = sim.unsqueeze(0)
        mask = None if mask is None else mask.unsqueeze(0)
    if sim.dim() != 3:
        raise ValueError(f"similarities must be (m, n) or (batch, m, n), got shape {tuple(sim.shape)}")
    if mask is None:
        mask = torch.ones_like(sim, dtype=torch.bool)
    if mask.shape != sim.shape:
        raise ValueError(f"mask shape {tuple(mask.shape)} differs from the similarities' {tuple(sim.shape)}")
    return sim, mask.to(torch.bool), single


def log_sinkhorn(sim: torch.Tensor, mask: torch.Tensor, eps: float, n_iter: int) -> torch.Tensor:
    """log P (batch, m, n) of the entropic OT plan for cost −sim, uniform marginals over each matrix's real
    cells, after `n_iter` Sinkhorn iterations (log domain, so small ε does not overflow). -inf outside the mask."""
    if eps <= 0 or n_iter < 0:
        raise ValueError(f"sinkhorn needs eps > 0 and n_iter >= 0, got eps={eps}, n_iter={n_iter}")
    sim = sim.to(torch.promote_types(sim.dtype, torch.float32))  # bf16 in, fp32 out; fp64 stays fp64
    rows, cols = mask.any(2), mask.any(1)  # (B, m), (B, n)
    log_a = -torch.log(rows.sum(1, keepdim=True).clamp(min=1).to(sim.dtype))  # uniform marginals, (B, 1)
    log_b = -torch.log(cols.sum(1, keepdim=True).clamp(min=1).to(sim.dtype))
    neg_inf = torch.tensor(float("-inf"), dtype=sim.dtype, device=sim.device)
    log_k = torch.where(mask, sim / eps, neg_inf)
    f = torch.where(rows, 0.0, neg_inf)
    g = torch.where(cols, 0.0, neg_inf)
    for _ in range(n_iter):  # columns, then rows (as POT's sinkhorn_knopp): the row marginals end exact
        g = torch.where(cols, log_b - torch.logsumexp(log_k + f.unsqueeze(2), dim=1), neg_inf)
        f = torch.where(rows, log_a - torch.logsumexp(log_k + g.unsqueeze(1), dim=2), neg_inf)
    log_plan = log_k + f.unsqueeze(2) + g.unsqueeze(1)
    if n_iter:  # one real row or column: the plan is exactly a ⊗ b, not a ⊗ b plus rounding noise
        single_side = (rows.sum(1) == 1) | (cols.sum(1) == 1)
        exact = (log_a + log_b).unsqueeze(2).expand_as(log_plan)
        log_plan = torch.where(single_side[:, None, None] & mask, exact, log_plan)
    return log_plan


def sinkhorn(sim: torch.Tensor, eps: float, n_iter: int, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Entropic OT plan (same shape as `sim`, 0 outside the mask) for cost −sim (equivalently 1 − cosine) with
    uniform marginals: `ot.sinkhorn(a, b, -sim, eps, numItermax=n_iter, stopThr=0)` in POT's terms."""
    sim, mask, single = as_batch(sim, mask)
    plan = log_sinkhorn(sim, mask, eps, n_iter).exp()
    return plan[0] if single else plan
