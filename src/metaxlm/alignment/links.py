"""Links from batches of similarity matrices: SimAlign's argmax and itermax, and XLM-Align's OT aligner.

Every function takes `sim` (batch, m, n) (or (m, n)) and a boolean `mask` of the same shape marking the real
(source token, target token) cells of each padded matrix, and returns a boolean link matrix (links only inside
the mask).

XLM-Align (Chi et al. 2021, Sect. 3.2) as read here, checked against the authors' released code
(`--sinkhorn_iter 2 --wa_max_count 2`):
* the alignment is the transport plan P of entropic OT between the two token sets (see `ot`);
* Eq. (7): A = {(i, j) | j = argmax_k P_ik and i = argmax_k P_kj}, the forward/backward argmax intersection;
* Eq. (8)–(9), the iterative alignment filtering: P is re-weighted by the links found so far, cells whose row
  and column are both aligned are dropped (× 0), cells with one of them aligned are discounted (× α), and
  the argmax intersection of the re-weighted plan adds its links to A (only cells with a free row or
  column); `max_count` rounds in all (1 = the plain intersection). This is the `itermax` of SimAlign (Jalili
  Sabet et al. 2020) applied to the plan instead of the similarity, and is what the authors run with α = 0.9.

Where metaxlm departs: exact ties of the score (the plan of a one-token side is uniform) go to the cell of
higher similarity, then to the first index; the paper leaves ties open and argmax alone picks the first index.
"""

from __future__ import annotations

import torch

from metaxlm.alignment.ot import as_batch, log_sinkhorn

__all__ = ["SIMALIGN_ALPHA", "SIMALIGN_MAX_COUNT", "argmax_links", "itermax_links", "ot_links"]

SIMALIGN_ALPHA = 0.9  # SimAlign's itermax discount and rounds (Jalili Sabet et al. 2020; simalign 0.4)
SIMALIGN_MAX_COUNT = 2


def _argmax_cells(score: torch.Tensor, tie_break: torch.Tensor, dim: int) -> torch.Tensor:
    """One True per line along `dim` at the maximum of `score`; among exact ties, the maximum of `tie_break`."""
    tied = score == score.amax(dim, keepdim=True)
    pick = tie_break.masked_fill(~tied, float("-inf")).argmax(dim, keepdim=True)
    return torch.zeros_like(tied).scatter_(dim, pick, True)


def _mutual_argmax(score: torch.Tensor, sim: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Cells that are the maximum of their row and of their column; `score` is -inf outside the mask."""
    tie_break = sim.masked_fill(~mask, float("-inf"))
    return _argmax_cells(score, tie_break, 2) & _argmax_cells(score, tie_break, 1) & mask


def argmax_links(sim: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """SimAlign's argmax: the intersection of the forward and backward argmax."""
    sim, mask, single = as_batch(sim, mask)
    links = _mutual_argmax(sim.masked_fill(~mask, float("-inf")), sim, mask)
    return links[0] if single else links


def _iterative_filtering(log_score: torch.Tensor, sim: torch.Tensor, mask: torch.Tensor, alpha: float,
                         max_count: int) -> torch.Tensor:
    """Argmax intersection of a score (given as its log, -inf outside the mask), then up to max_count − 1 rounds
    on the re-weighted score (× 0 where row and column are aligned, × α where one is), keeping new links with a
    free row or column. Matrices with at most 2 real rows or columns, or no free row or column left, stop."""
    log_score = log_score.masked_fill(~mask, float("-inf"))
    links = _mutual_argmax(log_score, sim, mask)
    rows, cols = mask.any(2), mask.any(1)
    active = torch.minimum(rows.sum(1), cols.sum(1)) > 2
    for _ in range(max_count - 1):
        row_free = ~links.any(2)  # (B, m)
        col_free = ~links.any(1)  # (B, n)
        active = active & (row_free & rows).any(1) & (col_free & cols).any(1)
        weight = (alpha * row_free.unsqueeze(2).float() + alpha * col_free.unsqueeze(1).float()).clamp(max=1.0)
        weighted = log_score + weight.log()  # log(score × weight); log 0 = -inf drops the cell
        new = _mutual_argmax(weighted, sim, mask) & torch.isfinite(weighted)
        links = links | (new & active[:, None, None])
    return links


def itermax_links(sim: torch.Tensor, mask: torch.Tensor | None = None, *, alpha: float = SIMALIGN_ALPHA,
                  max_count: int = SIMALIGN_MAX_COUNT) -> torch.Tensor:
    """SimAlign's itermax on cosine similarities (rescaled to (cos + 1) / 2 ≥ 0, as SimAlign does). A cosine
    of unit vectors can round below −1 (v · −v in fp32): the rescaled value is clamped at 0 before the log, as
    a negative one would give NaN, which argmax takes for the maximum."""
    sim, mask, single = as_batch(sim, mask)
    links = _iterative_filtering(torch.log(((sim.float() + 1.0) / 2.0).clamp(min=0.0)), sim, mask, alpha, max_count)
    return links[0] if single else links


def ot_links(sim: torch.Tensor, mask: torch.Tensor | None = None, *, eps: float, n_iter: int, alpha: float,
             max_count: int) -> torch.Tensor:
    """XLM-Align's aligner: Sinkhorn plan of the similarities, argmax intersection with iterative filtering."""
    sim, mask, single = as_batch(sim, mask)
    links = _iterative_filtering(log_sinkhorn(sim, mask, eps, n_iter), sim, mask, alpha, max_count)
    return links[0] if single else links
