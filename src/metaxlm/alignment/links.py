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
  Sabet et al. 2020) applied to the plan instead of the similarity, and is what the authors run with α = 0.9
  (`filtering="released"`). The literal Eq. (9) differs: a cell whose row and column both hold links (not itself
  a link) is discounted by α, not dropped, and the discounts accumulate over rounds (`filtering="eq9"`);
  `filtering="none"` is the paper's no-filtering ablation (union of the two directions' argmax, Table 6).
* `OTAlignment` gathers the self-labelling settings under the paper's names (μ, Sinkhorn and filtering
  iterations, α, ε) with the paper's kernel (Eq. 1/5) or the cosine kernel of metaxlm's evaluation aligner.

Where metaxlm departs: exact ties of the score (the plan of a one-token side is uniform) go to the cell of
higher similarity, then to the first index; the paper leaves ties open and argmax alone picks the first index.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from metaxlm.alignment.ot import KERNELS, as_batch, kernel_similarity, log_sinkhorn

__all__ = ["FILTERINGS", "SIMALIGN_ALPHA", "SIMALIGN_MAX_COUNT", "OTAlignment", "argmax_links", "itermax_links",
           "ot_links", "union_links"]

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


FILTERINGS = ("released", "eq9", "none")


def _filter_weight(links: torch.Tensor, alpha: float, filtering: str) -> torch.Tensor:
    """The re-weighting of the score by the links found so far.
    released: × 0 where the cell's row and column are both aligned, × α where one is, × 1 where neither (the
              authors' released code and SimAlign's itermax);
    eq9:      × 0 on the links themselves, × α where the row or the column holds a link, × 1 elsewhere (Eq. 9)."""
    row_taken, col_taken = links.any(2, keepdim=True), links.any(1, keepdim=True)  # (B, m, 1), (B, 1, n)
    if filtering == "released":
        return (alpha * (~row_taken).float() + alpha * (~col_taken).float()).clamp(max=1.0)
    touched = row_taken | col_taken
    return torch.where(links, 0.0, torch.where(touched, alpha, 1.0))


def _iterative_filtering(log_score: torch.Tensor, sim: torch.Tensor, mask: torch.Tensor, alpha: float,
                         max_count: int, filtering: str = "released") -> torch.Tensor:
    """Argmax intersection of a score (given as its log, -inf outside the mask), then up to max_count − 1 rounds
    on the re-weighted score (`_filter_weight`), adding the argmax intersection of each round.

    released: as the authors' code and SimAlign: the weights are recomputed from the links each round, a new link
              needs a free row or column, and matrices with at most 2 real rows or columns (or no free row or column
              left) stop;
    eq9:      the paper's Eq. (8)–(9) read literally: the score itself is updated each round (weights accumulate),
              every cell of the new argmax intersection with a non-zero score joins.
    `filtering="none"` is not handled here (see `union_links`)."""
    if filtering not in ("released", "eq9"):
        raise ValueError(f"filtering must be one of {FILTERINGS}, got {filtering!r}")
    log_score = log_score.masked_fill(~mask, float("-inf"))
    links = _mutual_argmax(log_score, sim, mask)
    if filtering == "eq9":
        for _ in range(max_count - 1):
            log_score = log_score + _filter_weight(links, alpha, filtering).log()
            links = links | (_mutual_argmax(log_score, sim, mask) & torch.isfinite(log_score))
        return links
    rows, cols = mask.any(2), mask.any(1)
    active = torch.minimum(rows.sum(1), cols.sum(1)) > 2
    for _ in range(max_count - 1):
        row_free = ~links.any(2)  # (B, m)
        col_free = ~links.any(1)  # (B, n)
        active = active & (row_free & rows).any(1) & (col_free & cols).any(1)
        weighted = log_score + _filter_weight(links, alpha, filtering).log()  # log 0 = -inf drops it
        new = _mutual_argmax(weighted, sim, mask) & torch.isfinite(weighted)
        links = links | (new & active[:, None, None])
    return links


def union_links(log_score: torch.Tensor, sim: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """No filtering (the paper's Table 6 ablation): the UNION of the forward and backward argmax of the score."""
    log_score = log_score.masked_fill(~mask, float("-inf"))
    tie_break = sim.masked_fill(~mask, float("-inf"))
    return (_argmax_cells(log_score, tie_break, 2) | _argmax_cells(log_score, tie_break, 1)) & mask


def itermax_links(sim: torch.Tensor, mask: torch.Tensor | None = None, *, alpha: float = SIMALIGN_ALPHA,
                  max_count: int = SIMALIGN_MAX_COUNT) -> torch.Tensor:
    """SimAlign's itermax on cosine similarities (rescaled to (cos + 1) / 2 ≥ 0, as SimAlign does). A cosine
    of unit vectors can round below −1 (v · −v in fp32): the rescaled value is clamped at 0 before the log, as
    a negative one would give NaN, which argmax takes for the maximum."""
    sim, mask, single = as_batch(sim, mask)
    links = _iterative_filtering(torch.log(((sim.float() + 1.0) / 2.0).clamp(min=0.0)), sim, mask, alpha, max_count)
    return links[0] if single else links


def ot_links(sim: torch.Tensor, mask: torch.Tensor | None = None, *, eps: float, n_iter: int, alpha: float,
             max_count: int, filtering: str = "released") -> torch.Tensor:
    """XLM-Align's aligner: Sinkhorn plan of the similarities (log kernel = sim / eps), argmax intersection with
    iterative filtering (`filtering`: released | eq9, see `_iterative_filtering`; none: the union of both
    directions' argmax, no filtering)."""
    sim, mask, single = as_batch(sim, mask)
    log_plan = log_sinkhorn(sim, mask, eps, n_iter)
    if filtering == "none":
        links = union_links(log_plan, sim, mask)
    else:
        links = _iterative_filtering(log_plan, sim, mask, alpha, max_count, filtering)
    return links[0] if single else links


@dataclass(frozen=True)
class OTAlignment:
    """XLM-Align's self-labelling aligner with the paper's parameter names (Sect. 3.1, Table 11).

    kernel:         "paper"  — f_sim = log max(ε, h_i·h_j) and K = exp(f_sim / μ) = max(ε, h_i·h_j)^(1/μ) (Eq. 1, 5),
                               on the raw hidden states;
                    "cosine" — K = exp(cos(h_i, h_j) / μ), metaxlm's evaluation aligner (cosines of unit vectors);
    mu:             entropic regularisation μ (Eq. 3);        sinkhorn_iters: Sinkhorn iterations (Eq. 6);
    filter_iters:   alignment filtering iterations (1 = the plain argmax intersection, Eq. 7);
    alpha:          the filtering discount α (Eq. 9);         epsilon: ε of Eq. 1 (keeps the log finite);
    filtering:      "released" (the authors' itermax), "eq9" (Eq. 9 literally) or "none" (union, Table 6).
    The paper's defaults (Table 11): μ = 1, 2 Sinkhorn iterations, 2 filtering iterations, α = 0.9."""

    kernel: str = "paper"
    mu: float = 1.0
    sinkhorn_iters: int = 2
    filter_iters: int = 2
    alpha: float = 0.9
    filtering: str = "released"
    epsilon: float = 1e-6

    def __post_init__(self):
        if self.kernel not in KERNELS or self.filtering not in FILTERINGS:
            raise ValueError(f"kernel must be one of {KERNELS} and filtering one of {FILTERINGS}, "
                             f"got {self.kernel!r}, {self.filtering!r}")
        if self.mu <= 0 or self.sinkhorn_iters < 0 or self.filter_iters < 1 or not 0 <= self.alpha <= 1 \
                or self.epsilon <= 0:
            raise ValueError(f"need mu > 0, sinkhorn_iters >= 0, filter_iters >= 1, 0 <= alpha <= 1, epsilon > 0; "
                             f"got {self}")

    def similarity(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        """(batch, m, n) similarities of (batch, m, d) source and (batch, n, d) target states whose division by μ
        is the log kernel: log max(ε, h·h) (paper) or the cosine."""
        return kernel_similarity(src, tgt, self.kernel, self.epsilon)

    def links(self, src: torch.Tensor, tgt: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Boolean (batch, m, n) links between the real tokens (`mask`) of padded source and target states."""
        return self.links_from_similarity(self.similarity(src, tgt), mask)

    def links_from_similarity(self, sim: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """`links` for similarities already computed with `similarity`."""
        return ot_links(sim, mask, eps=self.mu, n_iter=self.sinkhorn_iters, alpha=self.alpha,
                        max_count=self.filter_iters, filtering=self.filtering)
