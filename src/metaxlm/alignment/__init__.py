"""The alignment core shared by evaluation (`features.alignment`) and pretraining objectives: entropic OT on
similarity matrices (`ot`), links from batches of similarity matrices (`links`: argmax, itermax, XLM-Align's
OT aligner) and sub-word pieces of pre-split sentences with their word links (`subwords`).

Needs only torch and a fast tokenizer: nothing here imports features, evaluation, finetune, pretrain or report.
"""

from metaxlm.alignment.links import (
    FILTERINGS,
    SIMALIGN_ALPHA,
    SIMALIGN_MAX_COUNT,
    OTAlignment,
    argmax_links,
    itermax_links,
    ot_links,
    union_links,
)
from metaxlm.alignment.ot import KERNELS, kernel_similarity, log_sinkhorn, sinkhorn
from metaxlm.alignment.subwords import (
    BARE_PIECE,
    PairBatch,
    WordPieces,
    bare_piece_ids,
    pair_batch,
    word_links,
    word_pieces,
)

__all__ = ["BARE_PIECE", "FILTERINGS", "KERNELS", "SIMALIGN_ALPHA", "SIMALIGN_MAX_COUNT", "OTAlignment", "PairBatch",
           "WordPieces", "argmax_links", "bare_piece_ids", "itermax_links", "kernel_similarity", "log_sinkhorn",
           "ot_links", "pair_batch",
           "sinkhorn", "union_links", "word_links", "word_pieces"]
