"""Links from batches of similarity matrices: SimAlign's argmax and itermax, and XLM-Align's optimal transport.

Every function takes `sim` (batch, m, n) (or (m, n)) and a boolean `mask` of the same shape marking the real
(source token, target token) cells of each padded matrix, and returns a boolean link matrix (links only inside
the mask).

XLM-Align (Chi et al. 2021, Sect. 3.2) as read here, checked against the authors' released code (the `xlm_align`
fairseq task, `--sinkhorn_iter 2 --wa_max_count 2`):
* the alignment is the transport plan P of entropic optimal transport between the two token sets: uniform
  marginals, cost = −similarity, regularisation ε, solved by a FIXED small number of Sinkhorn iterations
  (each: normalise columns, then rows), not to convergence;
* Eq. (7): A = {(i, j) | j = argmax_k P_ik and i = argmax_k P_kj}, the forward/backward argmax intersection;
* Eq. (8)–(9), the iterative alignment filtering: P is re-weighted by the links found so far, cells whose row
  and column are both aligned are dropped (× 0), cells with one of them aligned are discounted (× α), and
  the argmax intersection of the re-weighted plan adds its links to A (only cells with a free row or
  column); `max_count` rounds in all (1 = the plain intersection). This is the `itermax` of SimAlign (Jalili
  Sabet et al. 2020) applied to the plan instead of the similarity, and is what the authors run with α = 0.9.
The authors' code normalises the raw dot products (kernel = similarity clipped at 1e-6); here the kernel is
exp(similarity / ε) of cosine similarities, the entropic OT the paper describes, which the tests compare with
POT's `ot.sinkhorn`.
"""

from __future__ import annotations

import torch

SIMALIGN_ALPHA = 0.9  # SimAlign's itermax discount and rounds (Jalili Sabet et al. 2020; simalign 0.4)
SIMALIGN_MAX_COUNT = 2


def _batched(sim: torch.Tensor, mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, bool]:
    single = sim.dim() == 2
    if single:
        sim = sim.unsqueeze(0)
        mask = None if mask is None else mask.unsqueeze(0)
    if mask is None:
        mask = torch.ones_like(sim, dtype=torch.bool)
    return sim, mask.to(torch.bool), single


def log_sinkhorn(sim: torch.Tensor, mask: torch.Tensor, eps: float, n_iter: int) -> torch.Tensor:
    """log P of the entropic OT plan for cost −sim, uniform marginals over each matrix's real cells,
    after `n_iter` Sinkhorn iterations (log domain, so small ε does not overflow). -inf outside the mask."""
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
    return log_k + f.unsqueeze(2) + g.unsqueeze(1)


def sinkhorn(sim: torch.Tensor, eps: float, n_iter: int, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Entropic OT plan (same shape as `sim`, 0 outside the mask) for cost −sim (equivalently 1 − cosine) with
    uniform marginals: `ot.sinkhorn(a, b, -sim, eps, numItermax=n_iter, stopThr=0)` in POT's terms."""
    sim, mask, single = _batched(sim, mask)
    plan = log_sinkhorn(sim, mask, eps, n_iter).exp()
    return plan[0] if single else plan


def _mutual_argmax(score: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Cells that are the maximum of their row and of their column (first index on ties)."""
    forward = torch.zeros_like(mask).scatter_(2, score.argmax(2, keepdim=True), True)
    backward = torch.zeros_like(mask).scatter_(1, score.argmax(1, keepdim=True), True)
    return forward & backward & mask


def argmax_links(sim: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """SimAlign's argmax: the intersection of the forward and backward argmax."""
    sim, mask, single = _batched(sim, mask)
    links = _mutual_argmax(sim.masked_fill(~mask, float("-inf")), mask)
    return links[0] if single else links


def _iterative_filtering(log_score: torch.Tensor, mask: torch.Tensor, alpha: float, max_count: int) -> torch.Tensor:
    """Argmax intersection of a score (given as its log, -inf outside the mask), then up to max_count − 1 rounds
    on the re-weighted score (× 0 where row and column are aligned, × α where one is), keeping new links with a
    free row or column. Matrices with at most 2 real rows or columns, or no free row or column left, stop."""
    log_score = log_score.masked_fill(~mask, float("-inf"))
    links = _mutual_argmax(log_score, mask)
    rows, cols = mask.any(2), mask.any(1)
    active = torch.minimum(rows.sum(1), cols.sum(1)) > 2
    for _ in range(max_count - 1):
        row_free = ~links.any(2)  # (B, m)
        col_free = ~links.any(1)  # (B, n)
        active = active & (row_free & rows).any(1) & (col_free & cols).any(1)
        weight = (alpha * row_free.unsqueeze(2).float() + alpha * col_free.unsqueeze(1).float()).clamp(max=1.0)
        weighted = log_score + weight.log()  # log(score × weight); log 0 = -inf drops the cell
        new = _mutual_argmax(weighted, mask) & torch.isfinite(weighted)
        links = links | (new & active[:, None, None])
    return links


def itermax_links(sim: torch.Tensor, mask: torch.Tensor | None = None, *, alpha: float = SIMALIGN_ALPHA,
                  max_count: int = SIMALIGN_MAX_COUNT) -> torch.Tensor:
    """SimAlign's itermax on cosine similarities (rescaled to (cos + 1) / 2 ≥ 0, as SimAlign does)."""
    sim, mask, single = _batched(sim, mask)
    links = _iterative_filtering(torch.log((sim.float() + 1.0) / 2.0), mask, alpha, max_count)
    return links[0] if single else links


def ot_links(sim: torch.Tensor, mask: torch.Tensor | None = None, *, eps: float, n_iter: int, alpha: float,
             max_count: int) -> torch.Tensor:
    """XLM-Align's aligner: Sinkhorn plan of the similarities, argmax intersection with iterative filtering."""
    sim, mask, single = _batched(sim, mask)
    links = _iterative_filtering(log_sinkhorn(sim, mask, eps, n_iter), mask, alpha, max_count)
    return links[0] if single else links
