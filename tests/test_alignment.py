import numpy as np
import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertModel, BertTokenizerFast

from metaxlm.alignment import (
    argmax_links,
    itermax_links,
    ot_links,
    pair_batch,
    sinkhorn,
    word_links,
    word_pieces,
)
from metaxlm.cli import main
from metaxlm.data.examples import AlignmentSet
from metaxlm.errors import ConfigError, DataError
from metaxlm.features.alignment import (
    WordAligner,
    align_file,
    alignment_by_layer,
    alignment_dev_test,
    token_states,
)
from metaxlm.metrics import alignment_scores, lowest_aer_layer

SRC = [s.split() for s in ["das Haus ist klein", "die Katze schläft auf dem roten Stuhl", "房子很小", "das Haus"]]
TGT = [s.split() for s in ["the house is small", "the cat sleeps on the red chair", "the house is small", "das Haus"]]


@pytest.fixture(scope="module")
def tokenizer(tokenizer_dir):
    return AutoTokenizer.from_pretrained(str(tokenizer_dir))


def tiny_bert(tokenizer, positions=64) -> BertModel:
    torch.manual_seed(0)
    return BertModel(BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
                                intermediate_size=64, max_position_embeddings=positions,
                                pad_token_id=tokenizer.pad_token_id)).eval()


@pytest.fixture(scope="module")
def model(tokenizer):
    return tiny_bert(tokenizer)


def padded(matrices: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """A padded batch (garbage in the padding, which the mask must hide) and its mask."""
    m, n = max(x.shape[0] for x in matrices), max(x.shape[1] for x in matrices)
    sim = torch.full((len(matrices), m, n), 5.0, dtype=matrices[0].dtype)
    mask = torch.zeros((len(matrices), m, n), dtype=torch.bool)
    for b, x in enumerate(matrices):
        sim[b, :x.shape[0], :x.shape[1]] = x
        mask[b, :x.shape[0], :x.shape[1]] = True
    return sim, mask


def random_similarities(seed: int, sizes=((3, 5), (7, 4), (6, 6), (1, 3), (2, 9), (4, 1))) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.rand(m, n, generator=gen, dtype=torch.float64) * 2 - 1 for m, n in sizes]


# --- links from similarity matrices ---------------------------------------------------------------------

@pytest.mark.parametrize(("eps", "n_iter"), [(0.05, 1), (0.1, 2), (0.3, 5), (1.0, 50)])
def test_sinkhorn_matches_pot_on_random_padded_batches(eps, n_iter):
    ot = pytest.importorskip("ot")
    matrices = random_similarities(seed=int(eps * 100) + n_iter)
    sim, mask = padded(matrices)
    plan = sinkhorn(sim, eps, n_iter, mask)
    assert (plan[~mask] == 0).all()
    for b, x in enumerate(matrices):
        m, n = x.shape
        want = ot.sinkhorn(ot.unif(m), ot.unif(n), -x.numpy(), eps, numItermax=n_iter, stopThr=0.0, warn=False)
        np.testing.assert_allclose(plan[b, :m, :n].numpy(), want, rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(sinkhorn(x.float(), eps, n_iter).numpy(), want, rtol=2e-4, atol=1e-8)  # fp32


def test_sinkhorn_small_eps_does_not_overflow():
    plan = sinkhorn(random_similarities(seed=1)[2].float(), eps=0.001, n_iter=3)
    assert torch.isfinite(plan).all() and plan.sum().item() == pytest.approx(1.0, rel=1e-4)


def test_argmax_and_itermax_by_hand():
    cos = torch.tensor([[0.9, 0.1, 0.0],
                        [0.8, 0.2, 0.1],
                        [0.0, 0.3, 0.7]])
    # rows pick columns 0, 0, 2; columns pick rows 0, 2, 2: the intersection is (0,0) and (2,2)
    assert argmax_links(cos).nonzero().tolist() == [[0, 0], [2, 2]]
    # itermax round 2 on (cos+1)/2: row 1 is free; × α on cells with one aligned side, × 0 with both:
    # row 1 -> [.81, .60, .495] picks column 0; column 0 -> [0, .81, 0] picks row 1: (1,0) is added
    assert itermax_links(cos).nonzero().tolist() == [[0, 0], [1, 0], [2, 2]]
    assert itermax_links(cos, max_count=1).nonzero().tolist() == [[0, 0], [2, 2]]
    assert itermax_links(cos[:2, :2]).nonzero().tolist() == [[0, 0]]  # ≤ 2 words on a side: one round only


def mutual_argmax_by_similarity_tie_break(score: np.ndarray, sim: np.ndarray) -> set[tuple[int, int]]:
    """Cells that are the maximum of their row and column of `score`, exact ties going to the higher `sim`."""
    m, n = score.shape
    row_pick = [max(range(n), key=lambda j, i=i: (score[i, j], sim[i, j], -j)) for i in range(m)]
    col_pick = [max(range(m), key=lambda i, j=j: (score[i, j], sim[i, j], -i)) for j in range(n)]
    return {(i, j) for i, j in enumerate(row_pick) if col_pick[j] == i}


def reference_filtering(score: np.ndarray, sim: np.ndarray, alpha: float, max_count: int) -> set[tuple[int, int]]:
    """Iterative argmax filtering of one non-negative score matrix, written plainly with loops."""
    m, n = score.shape
    links = mutual_argmax_by_similarity_tie_break(score, sim)
    for _ in range(max_count - 1):
        rows, cols = {i for i, _ in links}, {j for _, j in links}
        if min(m, n) <= 2 or len(rows) == m or len(cols) == n:
            break
        weight = np.array([[min(1.0, alpha * (i not in rows) + alpha * (j not in cols)) for j in range(n)]
                           for i in range(m)])
        new = mutual_argmax_by_similarity_tie_break(score * weight, sim)
        links |= {(i, j) for i, j in new if i not in rows or j not in cols}
    return links


def exact_plan(x: np.ndarray, eps: float, n_iter: int) -> np.ndarray:
    """POT's plan, except for a one-row or one-column matrix: its exact plan is uniform (a ⊗ b); POT's carries
    rounding noise in the last bits, which would decide the argmax."""
    import ot

    m, n = x.shape
    if min(m, n) == 1:
        return np.full((m, n), 1.0 / (m * n))
    return ot.sinkhorn(ot.unif(m), ot.unif(n), -x, eps, numItermax=n_iter, stopThr=0.0, warn=False)


@pytest.mark.parametrize("max_count", [1, 2, 3])
def test_batched_itermax_and_ot_match_a_plain_reference(max_count):
    pytest.importorskip("ot")
    sizes = ((3, 5), (7, 4), (6, 6), (2, 3), (5, 8), (9, 9), (1, 4), (6, 1), (1, 1))
    matrices = random_similarities(seed=10 + max_count, sizes=sizes)
    sim, mask = padded(matrices)
    itermax = itermax_links(sim, mask, alpha=0.7, max_count=max_count)
    via_ot = ot_links(sim, mask, eps=0.2, n_iter=2, alpha=0.7, max_count=max_count)
    for b, x in enumerate(matrices):
        m, n = x.shape
        assert not itermax[b, m:].any() and not itermax[b, :, n:].any()
        got = {tuple(ij) for ij in itermax[b].nonzero().tolist()}
        assert got == reference_filtering(((x + 1) / 2).numpy(), x.numpy(), 0.7, max_count)
        plan = exact_plan(x.numpy(), 0.2, 2)
        assert {tuple(ij) for ij in via_ot[b].nonzero().tolist()} == reference_filtering(plan, x.numpy(), 0.7,
                                                                                        max_count)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_ot_links_a_one_token_side_to_its_most_similar_token(dtype):
    """The plan of a 1 × n (or m × 1) matrix is uniform, so the plan alone cannot choose: the link must go to
    the most similar token, for every such matrix, not to whichever cell rounding made largest."""
    gen = torch.Generator().manual_seed(0)
    for shape in [(1, 2), (1, 5), (1, 17), (2, 1), (4, 1), (9, 1)] * 20:
        x = (torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1).to(dtype)
        want = torch.zeros(shape, dtype=torch.bool)
        want.view(-1)[x.view(-1).argmax()] = True
        for n_iter in (1, 2, 5):
            assert torch.equal(ot_links(x, eps=0.2, n_iter=n_iter, alpha=0.9, max_count=2), want), (x, n_iter)
        plan = sinkhorn(x, eps=0.2, n_iter=2)
        assert (plan == plan.view(-1)[0]).all() and plan.sum().item() == pytest.approx(1.0)


@pytest.mark.parametrize("method", ["ot", "itermax", "argmax"])
def test_links_of_a_pair_do_not_depend_on_the_other_pairs_of_the_batch(method):
    def links(sim, mask):
        if method == "ot":
            return ot_links(sim, mask, eps=0.2, n_iter=2, alpha=0.9, max_count=2)
        return itermax_links(sim, mask) if method == "itermax" else argmax_links(sim, mask)

    gen = torch.Generator().manual_seed(1)
    shapes = [(1, 3), (1, 7), (5, 1), (1, 1), (2, 2), (3, 6), (8, 5), (12, 11), (1, 4), (3, 1), (1, 12), (9, 1)]
    matrices = [torch.rand(shape, generator=gen) * 2 - 1 for shape in shapes]
    alone = [links(x, None) for x in matrices]
    for seed in range(40):  # the same pairs in differently composed and padded batches
        order = torch.randperm(len(matrices), generator=torch.Generator().manual_seed(seed)).tolist()
        group = order[:1 + seed % len(order)]
        extra = [torch.rand(int(torch.randint(1, 20, (1,), generator=gen)), int(torch.randint(1, 20, (1,),
                            generator=gen)), generator=gen) * 2 - 1 for _ in range(seed % 3)]
        sim, mask = padded([matrices[k] for k in group] + extra)
        got = links(sim, mask)
        for q, k in enumerate(group):
            m, n = matrices[k].shape
            assert torch.equal(got[q, :m, :n], alone[k]) and not got[q, m:].any() and not got[q, :, n:].any()


def test_itermax_cosines_rounded_below_minus_one_are_not_nan():
    """fp32 cosines of unit vectors and their opposites round below −1; log((cos + 1) / 2) would be NaN, and
    argmax takes NaN for the maximum, linking exactly the opposite tokens."""
    gen = torch.Generator().manual_seed(0)
    unit = torch.nn.functional.normalize(torch.randn(64, 32, generator=gen), dim=-1)
    v = unit[((unit * -unit).sum(-1) < -1).nonzero()[0, 0]]  # a vector whose opposite has cosine < −1
    w = torch.nn.functional.normalize(v + 0.5 * unit[0], dim=0)
    src, tgt = torch.stack([v, unit[1]]), torch.stack([-v, w])
    cos = (src.unsqueeze(1) * tgt.unsqueeze(0)).sum(-1)  # the reduction that picked v
    assert cos[0, 0] < -1
    links = itermax_links(cos)
    assert not links[0, 0] and links[0, 1]  # v goes with w, the similar one, never with −v
    assert links.tolist() == argmax_links((cos + 1) / 2).tolist()  # the same order, no NaN


# --- sub-words -> words ----------------------------------------------------------------------------------

def test_word_pieces_sentencepiece_drops_bare_pieces_and_specials(tokenizer):
    words = "das Haus ist klein 房子很小 кошка спит".split()
    [pieces] = word_pieces(tokenizer, [words], limit=512)
    tokens = tokenizer.convert_ids_to_tokens(pieces.rows[0])
    start, end = pieces.spans[0]
    assert tokens[0] == "<s>" and tokens[-1] == "</s>" and (start, end) == (1, len(tokens) - 1)
    sentence = tokens[start:end]
    assert "▁" in sentence  # the tokenizer does emit a bare piece here (before 房...)
    kept = [sentence[p] for p in pieces.keep]
    assert "▁" not in kept and len(kept) == len(sentence) - sentence.count("▁")
    for w, word in enumerate(words):  # the kept pieces of each word spell it
        assert "".join(t for t, k in zip(kept, pieces.words, strict=True) if k == w).lstrip("▁") == word


def test_word_pieces_wordpiece():
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "house", "##s", "kit", "##ty", "sleep", "##ing",
             ",", "."]
    tokenizer = BertTokenizerFast(vocab={piece: i for i, piece in enumerate(vocab)})
    [pieces, empty] = word_pieces(tokenizer, [["the", "houses", ",", "kitty", "sleeping", "."], []], limit=512)
    assert tokenizer.convert_ids_to_tokens(pieces.rows[0]) == ["[CLS]", "the", "house", "##s", ",", "kit", "##ty",
                                                               "sleep", "##ing", ".", "[SEP]"]
    assert pieces.keep == list(range(9)) and pieces.words == [0, 1, 1, 2, 3, 3, 4, 4, 5]
    assert empty.rows == [] and empty.words == []


def test_pair_batch_and_word_links():
    """Sub-word links become word links (two pieces aligned ⇒ their words aligned); padding never links."""
    src_states = [torch.eye(4)[:3], torch.eye(4)[:1]]  # pair 0: 3 pieces (words 0, 0, 1); pair 1: one piece
    tgt_states = [torch.eye(4)[[1, 2, 0]], torch.eye(4)[[3, 0]]]
    src_words = [torch.tensor([0, 0, 1]), torch.tensor([0])]
    tgt_words = [torch.tensor([0, 1, 1]), torch.tensor([0, 1])]
    pairs = pair_batch(src_states, tgt_states, src_words, tgt_words)
    assert pairs.sim.shape == pairs.mask.shape == (2, 3, 3)
    assert pairs.mask[1].tolist() == [[True, True, False], [False, False, False], [False, False, False]]
    assert pairs.src_words.tolist() == [[0, 0, 1], [0, -1, -1]]
    links = argmax_links(pairs.sim, pairs.mask)  # piece i of pair 0 matches the target piece equal to it
    assert links[0].nonzero().tolist() == [[0, 2], [1, 0], [2, 1]] and links[1].nonzero().tolist() == [[0, 1]]
    assert word_links(links, pairs.src_words, pairs.tgt_words) == [{(0, 1), (0, 0), (1, 1)}, {(0, 1)}]
    everything = torch.ones_like(links)  # links in the padding are dropped
    assert word_links(everything, pairs.src_words, pairs.tgt_words)[1] == {(0, 0), (0, 1)}
    with pytest.raises(ValueError, match="as many"):
        pair_batch(src_states, tgt_states[:1], src_words, tgt_words)


# --- the aligner ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["argmax", "itermax"])
def test_identical_sentences_align_on_the_diagonal(model, tokenizer, method):
    sentences = SRC[:3]
    gold = [{(i, i) for i in range(len(s))} for s in sentences]
    result = alignment_by_layer(model, tokenizer, AlignmentSet(sentences, sentences, gold, gold), method=method,
                                precision="fp32")
    assert result["layers"] == [0, 1, 2, 3]
    assert result["aer"] == [0.0] * 4 and result["f1"] == [1.0] * 4


def test_all_layers_from_one_pass_equal_single_layer_runs_and_each_sentence_is_encoded_once(model, tokenizer):
    aligner = WordAligner(model, tokenizer, method="ot", precision="fp32", batch_size=2, pair_batch_size=2)
    rows = []
    handle = model.embeddings.register_forward_hook(lambda _m, args, out: rows.append(out.shape[0]))
    try:
        together = aligner.align_layers(SRC, TGT, [1, 3])
    finally:
        handle.remove()
    assert sum(rows) == len({tuple(s) for s in SRC + TGT}) == 6  # of 8 sentences: two repeat
    for layer in (1, 3):
        assert together[layer] == aligner.align(SRC, TGT, layer=layer)
    assert all(0 <= i < len(s) and 0 <= j < len(t) for links, s, t in zip(together[3], SRC, TGT, strict=True)
               for i, j in links)
    assert together[3][3] == {(0, 0), (1, 1)}  # identical pair


def test_one_word_lines_align_the_same_whatever_shares_their_pair_batch(model, tokenizer):
    """A one-piece line (like "Ja"; "Haus" is one piece in the test vocabulary) links to exactly one target word,
    the same one alone or among other pairs."""
    src, tgt = [["Haus"], *SRC, ["Haus"]], [["a", "house", "."], *TGT, ["the", "small", "house"]]
    [pieces] = word_pieces(tokenizer, [["Haus"]], limit=512)
    assert len(pieces.keep) == 1  # one sub-word: its 1 × n plan is uniform
    runs = [WordAligner(model, tokenizer, method="ot", precision="fp32", max_count=2, pair_batch_size=size)
            .align(src, tgt, layer=2) for size in (1, 2, 256)]
    assert runs[0] == runs[1] == runs[2]
    for k in (0, -1):  # the link goes to the word of the most similar target piece
        sides = word_pieces(tokenizer, [src[k], tgt[k]], limit=512)
        states = token_states(model, tokenizer, sides, [2], precision="fp32")[2]
        best = int((states[0] @ states[1].T)[0].argmax())
        assert runs[0][k] == {(0, sides[1].words[best])}


def test_alignment_by_layer_scores_with_the_shared_metric(model, tokenizer):
    sure = [{(0, 0), (1, 1)}, {(0, 0), (1, 1), (2, 2)}, {(0, 1)}, {(0, 0), (1, 1)}]
    possible = [s | {(2, 3)} for s in sure]
    aset = AlignmentSet(SRC, TGT, sure, possible)
    result = alignment_by_layer(model, tokenizer, aset, method="ot", layers=[2], eps=0.5, n_iter=3)
    pred = WordAligner(model, tokenizer, method="ot", eps=0.5, n_iter=3).align(SRC, TGT, layer=2)
    want = alignment_scores(pred, sure, possible)
    assert result == {"layers": [2], **{k: [v] for k, v in want.items()}}


def gold_set() -> AlignmentSet:
    """SRC/TGT twice (8 pairs) with diagonal-ish gold links: dev = the first 3 pairs at the default fraction."""
    src, tgt = SRC + SRC, TGT + TGT
    sure = [{(i, i) for i in range(min(len(s), len(t)))} for s, t in zip(src, tgt, strict=True)]
    return AlignmentSet(src, tgt, sure, [x | {(0, 1)} for x in sure])


def test_dev_and_test_scores_come_from_one_encoder_pass_and_the_layer_from_dev(model, tokenizer):
    aset = gold_set()
    rows = []
    handle = model.embeddings.register_forward_hook(lambda _m, args, out: rows.append(out.shape[0]))
    try:
        result = alignment_dev_test(model, tokenizer, aset, method="ot", precision="fp32", eps=0.5)
    finally:
        handle.remove()
    assert sum(rows) == len({tuple(s) for s in aset.src + aset.tgt})  # each distinct sentence encoded once
    assert result["split"] == {"dev_fraction": 0.3, "dev_pairs": 3, "test_pairs": 5}
    dev, test = aset.dev_test()
    for part, name in ((dev, "dev"), (test, "test")):  # the same scores as each part aligned on its own
        alone = alignment_by_layer(model, tokenizer, part, method="ot", precision="fp32", eps=0.5)
        assert result["layers"] == alone["layers"] == [0, 1, 2, 3]
        assert result[name] == {k: alone[k] for k in ("aer", "precision", "recall", "f1")}
    assert result["chosen_on"] == "dev"
    assert result["chosen_layer"] == lowest_aer_layer(result["layers"], result["dev"]["aer"])


def test_without_a_dev_part_the_layer_is_the_fixed_default(model, tokenizer):
    aset = gold_set()
    result = alignment_dev_test(model, tokenizer, aset, dev_fraction=0.0, method="argmax", precision="fp32")
    assert "dev" not in result and result["split"] == {"dev_fraction": 0.0, "dev_pairs": 0, "test_pairs": 8}
    assert (result["chosen_layer"], result["chosen_on"]) == (2, "fixed default")  # 7/12 of 3 layers
    assert result["test"] == {k: v for k, v in alignment_by_layer(model, tokenizer, aset, method="argmax",
                                                                  precision="fp32").items() if k != "layers"}
    with pytest.raises(ConfigError, match="default layer 2, which the evaluated layers \\[1, 3\\] leave out"):
        alignment_dev_test(model, tokenizer, aset, dev_fraction=0.0, layers=[1, 3])
    one = alignment_dev_test(model, tokenizer, aset.subset(range(1)), layers=[2], precision="fp32")
    assert (one["chosen_on"], one["split"]["test_pairs"]) == ("fixed default", 1)  # one pair: nothing to split


def test_link_settings_swept_over_states_encoded_once(model, tokenizer):
    base = WordAligner(model, tokenizer, method="ot", precision="fp32")
    encoded = base.encode(SRC, TGT, [1, 2])
    for eps, max_count in ((0.05, 1), (1.0, 2)):
        swept = base.with_links_settings(eps=eps, max_count=max_count)
        assert swept.encoder is base.encoder and (base.eps, base.max_count) == (0.2, 1)  # the base is unchanged
        fresh = WordAligner(model, tokenizer, method="ot", precision="fp32", eps=eps, max_count=max_count)
        assert swept.links_at(encoded, 2) == fresh.align(SRC, TGT, layer=2)
        assert swept.links_at(encoded.subset(range(1, 3)), 1) == fresh.align(SRC[1:3], TGT[1:3], layer=1)
    with pytest.raises(ConfigError, match="eps"):
        base.with_links_settings(eps=-1.0)


def test_long_sentences_are_chunked_with_a_warning_never_an_index_error(tokenizer):
    model = tiny_bert(tokenizer, positions=16)
    long = ("das Haus ist klein und die Katze schläft auf dem roten Stuhl am offenen Fenster " * 3).split()
    aligner = WordAligner(model, tokenizer, method="argmax", precision="fp32")
    with pytest.warns(UserWarning, match="longer than the model's 16 positions"):
        [links] = aligner.align([long], [long])
    assert {(i, i) for i in range(len(long))} <= links  # words past position 16 are aligned too


def test_the_papers_kernel_and_filtering_in_the_evaluation_aligner(model, tokenizer):
    """kernel="paper": OT on log max(ε, h·h) of the raw states (not cosines); the links are those of the shared core
    on exactly those similarities; filtering="eq9" and "none" change the links as the core does."""
    from metaxlm.alignment import OTAlignment

    aligner = WordAligner(model, tokenizer, method="ot", kernel="paper", eps=1.0, max_count=2, filtering="eq9",
                          precision="fp32")
    links = aligner.align(SRC, TGT, layer=2)
    sides = word_pieces(tokenizer, [SRC[0], TGT[0]], limit=512)
    raw = token_states(model, tokenizer, sides, [2], precision="fp32", normalize=False)[2]
    assert not torch.allclose(raw[0].norm(dim=-1), torch.ones(len(raw[0])))  # raw states, not unit vectors
    core = OTAlignment(kernel="paper", mu=1.0, filter_iters=2, filtering="eq9")
    token_links = core.links(raw[0][None], raw[1][None], torch.ones(1, len(raw[0]), len(raw[1]), dtype=torch.bool))
    src_w, tgt_w = torch.tensor([sides[0].words]), torch.tensor([sides[1].words])
    assert links[0] == word_links(token_links, src_w, tgt_w)[0]
    union = WordAligner(model, tokenizer, method="ot", filtering="none", precision="fp32").align(SRC, TGT, layer=2)
    plain = WordAligner(model, tokenizer, method="ot", precision="fp32").align(SRC, TGT, layer=2)
    assert all(p <= u for p, u in zip(plain, union, strict=True))  # the union holds the intersection's links
    with pytest.raises(ConfigError, match="kernel"):
        WordAligner(model, tokenizer, kernel="rbf")


def test_aligner_settings_are_checked(model, tokenizer):
    with pytest.raises(ConfigError, match="method"):
        WordAligner(model, tokenizer, method="grow-diag")
    with pytest.raises(ConfigError, match="eps"):
        WordAligner(model, tokenizer, eps=0.0)
    with pytest.raises(ConfigError, match="0..3"):
        WordAligner(model, tokenizer, layer=7)
    assert WordAligner(model, tokenizer).layer == 2  # 7/12 of the depth, rounded


# --- align_file ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def model_dir(model, tokenizer, tmp_path_factory):
    path = tmp_path_factory.mktemp("aligner-model")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_align_file_writes_pharaoh_lines(model_dir, model, tokenizer, tmp_path):
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("".join(f"{' '.join(s)} ||| {' '.join(t)}\n" for s, t in zip(SRC, TGT, strict=True))
                     + "das Haus |||\n", encoding="utf-8")
    out = tmp_path / "out" / "links.txt"
    assert align_file(model_dir, pairs, None, out, layer=2, method="itermax", progress=False).pairs == 5
    want = WordAligner(model, tokenizer, method="itermax").align(SRC, TGT, layer=2)
    lines = out.read_text(encoding="utf-8").split("\n")
    assert lines[-2:] == ["", ""]  # the pair with an empty side has no links
    assert [{tuple(map(int, link.split("-"))) for link in line.split()} for line in lines[:4]] == want
    # two line-aligned files give the same output
    src, tgt = tmp_path / "src.txt", tmp_path / "tgt.txt"
    src.write_text("".join(" ".join(s) + "\n" for s in SRC), encoding="utf-8")
    tgt.write_text("".join(" ".join(t) + "\n" for t in TGT), encoding="utf-8")
    out2 = tmp_path / "links2.txt"
    align_file(model_dir, src, tgt, out2, layer=2, method="itermax", progress=False, block_size=3)
    assert out2.read_text(encoding="utf-8").split("\n")[:4] == lines[:4]


def test_align_file_bad_input_names_file_and_line_and_writes_nothing(model_dir, tmp_path):
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("das Haus ||| the house\nno separator here\n", encoding="utf-8")
    out = tmp_path / "links.txt"
    with pytest.raises(DataError, match=r"pairs.txt:2: expected 'source \|\|\| target'"):
        align_file(model_dir, pairs, None, out, progress=False)
    src, tgt = tmp_path / "a.txt", tmp_path / "b.txt"
    src.write_text("a b\nc d\ne\n", encoding="utf-8")
    tgt.write_text("a b\nc d\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"b.txt:2: file ends here"):
        align_file(model_dir, src, tgt, out, progress=False)
    assert sorted(tmp_path.iterdir()) == sorted([pairs, src, tgt])  # no output, no temporary file


def write_gold_files(folder, aset: AlignmentSet, name: str):
    """`aset` as files: '<name>.src', '<name>.tgt' and 0-based Pharaoh gold '<name>.gold' ('ipj' possible)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{name}.{ext}" for ext in ("src", "tgt", "gold")]
    paths[0].write_text("".join(" ".join(s) + "\n" for s in aset.src), encoding="utf-8")
    paths[1].write_text("".join(" ".join(t) + "\n" for t in aset.tgt), encoding="utf-8")
    paths[2].write_text("".join(" ".join([*(f"{i}-{j}" for i, j in sorted(s)), *(f"{i}p{j}" for i, j in sorted(p - s))])
                                + "\n" for s, p in zip(aset.sure, aset.possible, strict=True)), encoding="utf-8")
    return paths


def test_align_on_the_layer_chosen_on_a_dev_set(model_dir, model, tokenizer, tmp_path, capsys):
    dev, test = gold_set().dev_test(0.5)
    dev_files, test_files = write_gold_files(tmp_path, dev, "dev"), write_gold_files(tmp_path, test, "test")
    out = tmp_path / "links.txt"
    done = align_file(model_dir, *test_files[:2], out, dev=dev, gold=test, method="argmax", progress=False)
    want_dev = alignment_by_layer(model, tokenizer, dev, method="argmax")
    assert done.dev_scores == want_dev and done.layer == lowest_aer_layer(want_dev["layers"], want_dev["aer"])
    links = WordAligner(model, tokenizer, method="argmax").align(test.src, test.tgt, layer=done.layer)
    assert out.read_text(encoding="utf-8").splitlines() == [" ".join(f"{i}-{j}" for i, j in sorted(x)) for x in links]
    assert done.scores == alignment_scores(links, test.sure, test.possible)
    printed = capsys.readouterr().out
    assert "AER on the dev set (4 pairs), per layer:" in printed and f"layer {done.layer}: lowest dev AER" in printed
    # the command line: per-layer dev AER, the chosen layer, and the test AER against --gold
    argv = ["align", "--model", str(model_dir), "--src", str(test_files[0]), "--tgt", str(test_files[1]),
            "--out", str(tmp_path / "cli.txt"), "--method", "argmax", "--layer", "dev", "--dev-src",
            str(dev_files[0]), "--dev-tgt", str(dev_files[1]), "--dev-gold", str(dev_files[2]), "--gold",
            str(test_files[2]), "--no-progress"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert (tmp_path / "cli.txt").read_text(encoding="utf-8") == out.read_text(encoding="utf-8")
    assert f"aligned 4 sentence pairs at layer {done.layer}" in printed
    assert f"AER {100 * done.scores['aer']:.1f}%" in printed and "dev AER %" in printed
    with pytest.raises(ConfigError, match="not both"):
        align_file(model_dir, *test_files[:2], out, layer=1, dev=dev, progress=False)


def test_align_layer_dev_errors_are_one_line_naming_the_file(model_dir, tmp_path, capsys):
    dev, test = gold_set().dev_test(0.5)
    dev_files, test_files = write_gold_files(tmp_path, dev, "dev"), write_gold_files(tmp_path, test, "test")
    base = ["align", "--model", str(model_dir), "--src", str(test_files[0]), "--tgt", str(test_files[1]),
            "--out", str(tmp_path / "links.txt"), "--no-progress"]
    dev_args = ["--dev-src", str(dev_files[0]), "--dev-tgt", str(dev_files[1]), "--dev-gold"]

    def error(argv) -> str:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1
        return err

    assert "--layer dev needs the dev set" in error([*base, "--layer", "dev"])
    assert "choose the layer with --layer dev" in error([*base, *dev_args, str(dev_files[2])])
    missing = tmp_path / "missing.gold"
    assert str(missing) in error([*base, "--layer", "dev", *dev_args, str(missing)])
    bad = tmp_path / "bad.gold"
    bad.write_text("0-0\n0:1\n", encoding="utf-8")
    assert f"{bad}:2: bad link '0:1'" in error([*base, "--layer", "dev", *dev_args, str(bad)])
    short = tmp_path / "short.tgt"
    short.write_text("the house\n", encoding="utf-8")
    assert f"{short}:1: file ends here" in error([*base, "--layer", "dev", "--dev-src", str(dev_files[0]),
                                                  "--dev-tgt", str(short), "--dev-gold", str(dev_files[2])])
    assert not (tmp_path / "links.txt").exists()
    empty = [tmp_path / f"empty.{ext}" for ext in ("src", "tgt", "gold")]
    for path in empty:
        path.write_text("", encoding="utf-8")
    assert f"{empty[0]}: empty file" in error([*base, "--layer", "dev", "--dev-src", str(empty[0]),
                                              "--dev-tgt", str(empty[1]), "--dev-gold", str(empty[2])])
    with pytest.raises(ConfigError, match="the dev set has no sentence pairs"):
        align_file(model_dir, *test_files[:2], tmp_path / "links.txt", dev=AlignmentSet(), progress=False)
    with pytest.raises(SystemExit):
        main([*base, "--layer", "deep"])
    assert "expected a layer number or 'dev'" in capsys.readouterr().err
